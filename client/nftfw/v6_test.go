//go:build linux

package nftfw

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/client/acl"
)

// addV6 gives a and b IPv6 addresses on their link, with static
// neighbours: b's firewall stands for one on a WireGuard interface, where
// no neighbour discovery happens (it is layer 3), so the test must not
// depend on it crossing the rules.
func (x *lab) addV6() (a6, b6 netip.Addr, overlay6 netip.Prefix) {
	x.t.Helper()
	overlay6 = netip.MustParsePrefix("fd00:77:77:77::/64")
	a6, b6 = netip.MustParseAddr("fd00:77:77:77::a"), netip.MustParseAddr("fd00:77:77:77::b")
	mac := map[string]string{}
	for _, h := range []struct {
		ns   string
		addr netip.Addr
	}{{x.nsA, a6}, {x.nsB, b6}} {
		if out, err := x.l.Exec(h.ns, "ip", "addr", "add", h.addr.String()+"/64", "dev", "eth0", "nodad"); err != nil {
			x.t.Fatalf("add %s: %v: %s", h.addr, err, out)
		}
		out, err := x.l.Exec(h.ns, "cat", "/sys/class/net/eth0/address")
		if err != nil {
			x.t.Fatalf("read MAC: %v", err)
		}
		mac[h.ns] = strings.TrimSpace(out)
	}
	for _, n := range []struct{ ns, to, mac string }{{x.nsA, b6.String(), mac[x.nsB]}, {x.nsB, a6.String(), mac[x.nsA]}} {
		if out, err := x.l.Exec(n.ns, "ip", "-6", "neigh", "replace", n.to, "lladdr", n.mac, "dev", "eth0", "nud", "permanent"); err != nil {
			x.t.Fatalf("neighbour %s: %v: %s", n.to, err, out)
		}
	}
	for _, port := range []string{"22", "80"} {
		x.listen(x.nsB, b6, port)
	}
	x.listen(x.nsA, a6, "5000")
	return a6, b6, overlay6
}

// TestRulesV6: the peer rules on IPv6 packets on a real kernel: a's IPv6
// address may ping b and reach tcp/80, nothing else; the IPv6 rule does
// not open IPv4; b's own connections get their replies; allow-all admits
// the IPv6 overlay only while b has an address there.
func TestRulesV6(t *testing.T) {
	x := newLab(t)
	a6, b6, overlay6 := x.addV6()
	x.expect("a->b6:80 before rules", x.dial(x.nsA, b6, "80"), true)
	x.in(x.nsB, func() error { return x.fw.SetOverlay(netip.PrefixFrom(x.ipA, 24)) })
	x.in(x.nsB, func() error { return x.fw.SetOverlay6(overlay6) })

	x.set([]acl.Rule{
		{Peer: a6, Inbound: true, Accept: true, Proto: acl.ProtoICMP},
		{Peer: a6, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80},
	}, false)
	x.expect("a6 pings b6", x.ping(x.nsA, b6), true)
	x.expect("a6->b6:80", x.dial(x.nsA, b6, "80"), true)
	x.expect("a6->b6:22 (not allowed)", x.dial(x.nsA, b6, "22"), false)
	x.expect("a->b:80 over IPv4 (only the IPv6 rule)", x.dial(x.nsA, x.ipB, "80"), false)
	x.expect("b6->a6:5000 (b opens, replies come back)", x.dial(x.nsB, a6, "5000"), true)
	x.expect("b6 pings a6 (the echo reply is a reply)", x.ping(x.nsB, a6), true)

	// ICMP for any peer covers ICMPv6; a drop rule for the IPv6 peer.
	x.set([]acl.Rule{
		{Inbound: true, Accept: true, Proto: acl.ProtoICMP},
		{Peer: a6, Inbound: false, Accept: false, Proto: acl.ProtoTCP, PortLo: 5000, PortHi: 5000},
	}, false)
	x.expect("a6 pings b6 (any-peer ICMP)", x.ping(x.nsA, b6), true)
	x.expect("a pings b (any-peer ICMP)", x.ping(x.nsA, x.ipB), true)
	x.expect("a6->b6:80 (no rule)", x.dial(x.nsA, b6, "80"), false)
	x.expect("b6->a6:5000 dropped outbound", x.dial(x.nsB, a6, "5000"), false)

	x.set(nil, true)
	x.expect("a6->b6:22 allow-all", x.dial(x.nsA, b6, "22"), true)
	x.in(x.nsB, func() error { return x.fw.SetOverlay6(netip.Prefix{}) })
	x.expect("a6->b6:22 allow-all without an IPv6 overlay", x.dial(x.nsA, b6, "22"), false)
	x.expect("b6->a6:5000 without an IPv6 overlay (a reply)", x.dial(x.nsB, a6, "5000"), true)
	x.expect("a->b:22 allow-all over IPv4", x.dial(x.nsA, x.ipB, "22"), true)
}
