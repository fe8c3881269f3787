// Package addrpolicy decides which IP addresses a server may open
// connections to on a client's behalf: the TURN relay (relayed peers) and
// management's HTTP client for accounts' upstream identity providers (an
// admin-supplied URL). By default it denies this host (loopback, its own
// addresses), link-local (cloud metadata), multicast, reserved and
// documentation ranges and the CGNAT overlay; callers add ranges (the
// private LANs) and the operator's exceptions. It does not resolve names
// or dial: callers check the address they are about to connect to.
package addrpolicy

import (
	"fmt"
	"net"
	"net/netip"
)

// defaultDenied are the ranges denied whatever the caller adds: this host
// and its local network's special addresses, multicast and reserved ranges,
// and the overlay (CGNAT) range the accounts' networks are carved from.
var defaultDenied = []string{
	"0.0.0.0/8",          // "this network": 0.0.0.0 reaches the host itself
	"127.0.0.0/8",        // loopback
	"169.254.0.0/16",     // link-local (cloud metadata services live here)
	"100.64.0.0/10",      // CGNAT: the overlay networks
	"224.0.0.0/4",        // multicast
	"240.0.0.0/4",        // reserved, and 255.255.255.255 broadcast
	"::/128",             // unspecified
	"::1/128",            // loopback
	"fe80::/10",          // link-local
	"ff00::/8",           // multicast
	"::ffff:0:0/96",      // IPv4-mapped (checked unmapped as IPv4 too)
	"64:ff9b::/96",       // NAT64: would reach any IPv4 address, denied ones included
	"64:ff9b:1::/48",     // local-use NAT64 (RFC 8215): the same reach as the well-known prefix
	"2002::/16",          // 6to4, likewise
	"fec0::/10",          // deprecated site-local
	"fc00::/7",           // unique local: the overlay's IPv6 range
	"100::/64",           // discard-only
	"2001:db8::/32",      // documentation
	"192.0.0.0/24",       // IETF protocol assignments
	"198.18.0.0/15",      // benchmarking
	"192.0.2.0/24",       // documentation
	"198.51.100.0/24",    // documentation
	"203.0.113.0/24",     // documentation
	"255.255.255.255/32", // broadcast
}

// Private are the RFC 1918 ranges: denied to servers that have no reason
// to reach the operator's LAN (upstream identity providers), allowed by
// default to the TURN relay (peers may be there).
var Private = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
}

// Policy decides which addresses may be connected to. It is immutable once
// built and safe for concurrent use.
type Policy struct {
	allowed, denied []netip.Prefix
}

// New denies the default ranges, the server's own addresses and denied;
// allowed overrides all of them.
func New(own []netip.Addr, denied, allowed []netip.Prefix) *Policy {
	p := &Policy{allowed: allowed}
	for _, s := range defaultDenied {
		p.denied = append(p.denied, netip.MustParsePrefix(s))
	}
	for _, a := range own {
		if a.IsValid() {
			a = a.Unmap()
			p.denied = append(p.denied, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	p.denied = append(p.denied, denied...)
	return p
}

// Allowed reports whether a may be connected to.
func (p *Policy) Allowed(a netip.Addr) bool {
	if !a.IsValid() {
		return false
	}
	a = a.WithZone("")
	forms := []netip.Addr{a, a.Unmap()}
	for _, f := range forms {
		for _, pre := range p.allowed {
			if pre.Contains(f) {
				return true
			}
		}
	}
	for _, f := range forms {
		for _, pre := range p.denied {
			if pre.Contains(f) {
				return false
			}
		}
	}
	return true
}

// InterfaceAddrs are the addresses of every interface of this host, and the
// broadcast address of each IPv4 subnet on them.
func InterfaceAddrs() ([]netip.Addr, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("interface addresses: %w", err)
	}
	var out []netip.Addr
	for _, a := range addrs {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(n.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		out = append(out, ip)
		if ones, bits := n.Mask.Size(); ip.Is4() && bits == 32 && ones < 31 {
			b := ip.As4()
			for i := range 4 {
				b[i] |= ^n.Mask[len(n.Mask)-4+i]
			}
			out = append(out, netip.AddrFrom4(b))
		}
	}
	return out, nil
}
