package engine

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// localFlags is what this agent tells management about its local
// settings (the system meta's flags): the dashboard and the REST peers'
// local_flags show them.
func (o Options) localFlags() *mgmtpb.Flags {
	return &mgmtpb.Flags{
		DisableClientRoutes: o.DisableClientRoutes,
		DisableServerRoutes: o.DisableServerRoutes,
		DisableDNS:          o.DisableDNS,
		DisableIPv6:         o.DisableIPv6,
		BlockLANAccess:      o.BlockLANAccess,
		ServerSSHAllowed:    o.AllowServerSSH,
		DisableSSHAuth:      o.DisableSSHAuth,
	}
}

// withLANBlocked adds to r a drop rule for the parts of the host's local
// networks (lan) that r's routed networks reach, so an exit node or a
// routing peer does not open its own LAN to the peers it serves
// (--block-lan-access). Only the parts of a local network that served
// routes name (a route equal to it or inside it) stay reachable; routes
// wider than the LAN open nothing of it. The overlay itself is never
// blocked. Drop rules come before accept rules in both firewalls, and a
// legacy allow-all becomes an explicit accept so the drop applies to it
// too.
func withLANBlocked(r acl.Routing, lan []netip.Prefix, overlays ...netip.Prefix) acl.Routing {
	var block []netip.Prefix
	for _, l := range lan {
		l = l.Masked()
		if slices.ContainsFunc(overlays, func(o netip.Prefix) bool { return o.IsValid() && l.Overlaps(o.Masked()) }) {
			continue
		}
		reached := false
		var named []netip.Prefix
		for _, n := range r.Networks {
			if !n.Overlaps(l) {
				continue
			}
			reached = true
			// Only a route as narrow as the LAN or narrower names (part
			// of) it: a wider one (a default route, a split default
			// 0.0.0.0/1 + 128.0.0.0/1, a /16 around a /24 LAN) merely
			// contains it and must not open it.
			if n.Bits() > 0 && n.Bits() >= l.Bits() {
				named = append(named, n)
			}
		}
		if reached {
			block = append(block, subtractPrefixes(l, named)...)
		}
	}
	if len(block) == 0 {
		return r
	}
	slices.SortFunc(block, comparePrefixes)
	block = slices.Compact(block)
	out := acl.Routing{Networks: slices.Clone(r.Networks), Rules: []acl.RouteRule{{Dests: block, Proto: acl.ProtoAny}}}
	if r.AllowAll {
		out.Rules = append(out.Rules, acl.RouteRule{Dests: slices.Clone(r.Networks), Accept: true, Proto: acl.ProtoAny})
	}
	out.Rules = append(out.Rules, r.Rules...)
	return out
}

func comparePrefixes(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// subtractPrefixes is p without the addresses in holes, as prefixes.
func subtractPrefixes(p netip.Prefix, holes []netip.Prefix) []netip.Prefix {
	var inside []netip.Prefix
	for _, h := range holes {
		switch {
		case !h.Overlaps(p):
		case h.Bits() <= p.Bits():
			return nil // the hole covers p
		default:
			inside = append(inside, h)
		}
	}
	if len(inside) == 0 {
		return []netip.Prefix{p}
	}
	lo, hi := halves(p)
	return append(subtractPrefixes(lo, inside), subtractPrefixes(hi, inside)...)
}

// halves splits p (not a single address) into its two halves.
func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits()
	a := p.Addr().AsSlice()
	lo := netip.PrefixFrom(p.Addr(), bits+1)
	a[bits/8] |= 0x80 >> (bits % 8)
	hiAddr, _ := netip.AddrFromSlice(a)
	return lo, netip.PrefixFrom(hiAddr, bits+1)
}

// hostNetworks lists the networks of this host's interfaces (loopback,
// link-local and multicast left out): the LAN that --block-lan-access
// keeps from routed traffic. The overlay interface is left out by the
// caller, by its prefix.
func hostNetworks() ([]netip.Prefix, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	var out []netip.Prefix
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifc.Name, err)
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok {
				continue
			}
			ip, ok := netip.AddrFromSlice(ipn.IP)
			if !ok {
				continue
			}
			ip = ip.Unmap()
			if ip.IsLoopback() || ip.IsMulticast() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
				continue
			}
			ones, _ := ipn.Mask.Size()
			out = append(out, netip.PrefixFrom(ip, ones).Masked())
		}
	}
	return out, nil
}
