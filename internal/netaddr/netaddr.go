// Package netaddr picks the IPv4 address a server advertises for media it
// relays when the operator did not name one.
package netaddr

import (
	"context"
	"fmt"
	"net"
	"net/netip"
)

// RelayIP resolves host (an IP or a name) or, when host is empty, returns the
// first global unicast IPv4 address of this machine, else loopback.
func RelayIP(ctx context.Context, host string) (netip.Addr, error) {
	if host != "" {
		if a, err := netip.ParseAddr(host); err == nil {
			return a.Unmap(), nil
		}
		addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", host)
		if err != nil || len(addrs) == 0 {
			return netip.Addr{}, fmt.Errorf("resolve %s: %w", host, err)
		}
		return addrs[0].Unmap(), nil
	}
	ifaces, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range ifaces {
			if n, ok := a.(*net.IPNet); ok {
				if ip, ok := netip.AddrFromSlice(n.IP); ok {
					ip = ip.Unmap()
					if ip.Is4() && ip.IsGlobalUnicast() {
						return ip, nil
					}
				}
			}
		}
	}
	return netip.MustParseAddr("127.0.0.1"), nil
}
