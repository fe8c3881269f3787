//go:build linux

package nftfw

import (
	"net/netip"
	"testing"

	"github.com/wiremesh/wiremesh/client/acl"
)

// TestServices: on a real kernel, the SSH server's port opens to the map
// peers' overlay addresses without a policy, and only that: not another
// port, not another source, not a source outside the overlay, not a peer
// an inbound drop rule names, on IPv4 and IPv6, and nothing once the
// services are gone.
func TestServices(t *testing.T) {
	x := newLab(t)
	a6, b6, overlay6 := x.addV6()
	other, other6 := x.ipB.Next().Next(), netip.MustParseAddr("fd00:77:77:77::99") // in the overlays, not a
	x.in(x.nsB, func() error { return x.fw.SetOverlay(netip.PrefixFrom(x.ipA, 24)) })
	x.in(x.nsB, func() error { return x.fw.SetOverlay6(overlay6) })
	x.set(nil, false) // no policy at all
	x.expect("a->b:22 without a policy or a service", x.dial(x.nsA, x.ipB, "22"), false)

	svc := func(s acl.Services) { x.t.Helper(); x.in(x.nsB, func() error { return x.fw.SetServices(s) }) }
	ssh := []netip.AddrPort{netip.AddrPortFrom(x.ipB, 22), netip.AddrPortFrom(b6, 22)}
	svc(acl.Services{Ports: ssh, Peers: []netip.Addr{other, x.ipA, a6, other6}})
	x.expect("a->b:22 as a map peer", x.dial(x.nsA, x.ipB, "22"), true)
	x.expect("a6->b6:22 as a map peer", x.dial(x.nsA, b6, "22"), true)
	x.expect("a->b:80 (no service there)", x.dial(x.nsA, x.ipB, "80"), false)
	x.expect("a6->b6:80 (no service there)", x.dial(x.nsA, b6, "80"), false)

	svc(acl.Services{Ports: ssh, Peers: []netip.Addr{other, other6}})
	x.expect("a->b:22, a not in the map", x.dial(x.nsA, x.ipB, "22"), false)
	x.expect("a6->b6:22, a not in the map", x.dial(x.nsA, b6, "22"), false)

	svc(acl.Services{Ports: []netip.AddrPort{netip.AddrPortFrom(x.ipB, 22)}, Peers: []netip.Addr{x.ipA, a6}})
	x.expect("a6->b6:22, IPv6 address not listed", x.dial(x.nsA, b6, "22"), false)
	x.expect("a->b:22 listed", x.dial(x.nsA, x.ipB, "22"), true)

	x.set([]acl.Rule{{Peer: x.ipA, Inbound: true, Accept: false, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}}, false)
	x.expect("a->b:22 under an explicit drop rule", x.dial(x.nsA, x.ipB, "22"), false)
	x.set(nil, false)

	x.in(x.nsB, func() error { return x.fw.SetOverlay(netip.MustParsePrefix("100.70.0.0/16")) })
	x.expect("a->b:22, a outside the overlay", x.dial(x.nsA, x.ipB, "22"), false)
	x.in(x.nsB, func() error { return x.fw.SetOverlay(netip.PrefixFrom(x.ipA, 24)) })

	svc(acl.Services{})
	x.expect("a->b:22 once the services are gone", x.dial(x.nsA, x.ipB, "22"), false)
}
