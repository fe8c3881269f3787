package acl

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"
)

var (
	overlay = netip.MustParsePrefix("100.70.0.0/16")
	lan     = netip.MustParsePrefix("192.168.50.0/24")
	lanHost = netip.MustParseAddr("192.168.50.10")
	outside = netip.MustParseAddr("10.9.9.9")
)

func tcp6(src, dst netip.Addr, sport, dport uint16) []byte {
	b := make([]byte, 60)
	b[0], b[6] = 0x60, ProtoTCP
	s, d := src.As16(), dst.As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	binary.BigEndian.PutUint16(b[40:42], sport)
	binary.BigEndian.PutUint16(b[42:44], dport)
	b[53] = 0x02
	return b
}

// routingFilter is the filter of a routing peer (me) for lan.
func routingFilter(r Routing) *Filter {
	// No host addresses besides me: the test machine's own must not
	// change what the cases expect.
	f := NewWithOptions(Options{HostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{me}, nil }})
	f.SetOverlay(me, overlay)
	f.SetRules(nil, true)
	f.SetRouting(r)
	return f
}

// TestForwardDecisions: what a routing peer forwards from the tunnel.
func TestForwardDecisions(t *testing.T) {
	fromPeer := []netip.Prefix{netip.PrefixFrom(peer, 32)}
	web := RouteRule{Sources: fromPeer, Dests: []netip.Prefix{lan}, Accept: true, Proto: ProtoTCP, PortLo: 80, PortHi: 80}
	tests := []struct {
		name string
		r    Routing
		pkt  []byte
		want bool
	}{
		{"no routes: transit dropped", Routing{}, tcp(peer, lanHost, 5000, 80, true, false), false},
		{"legacy allow all", Routing{Networks: []netip.Prefix{lan}, AllowAll: true}, tcp(peer, lanHost, 5000, 22, true, false), true},
		{"legacy allow all, not our network", Routing{Networks: []netip.Prefix{lan}, AllowAll: true}, tcp(peer, outside, 5000, 22, true, false), false},
		{"rules present, none match: default deny", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{web}}, tcp(peer, lanHost, 5000, 22, true, false), false},
		{"port allowed", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{web}}, tcp(peer, lanHost, 5000, 80, true, false), true},
		{"wrong source", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{web}}, tcp(evil, lanHost, 5000, 80, true, false), false},
		{"wrong protocol", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{web}}, udp(peer, lanHost, 5000, 80), false},
		{"range", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{{Dests: []netip.Prefix{lan}, Accept: true, Proto: ProtoUDP, PortLo: 50, PortHi: 60}}}, udp(evil, lanHost, 1, 53), true},
		{"range, outside", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{{Dests: []netip.Prefix{lan}, Accept: true, Proto: ProtoUDP, PortLo: 50, PortHi: 60}}}, udp(evil, lanHost, 1, 61), false},
		{"icmp rule", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{{Dests: []netip.Prefix{lan}, Accept: true, Proto: ProtoICMP}}}, echo(peer, lanHost, false, 7), true},
		{"drop beats accept", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{
			{Dests: []netip.Prefix{lan}, Accept: true},
			{Sources: []netip.Prefix{netip.PrefixFrom(evil, 32)}, Dests: []netip.Prefix{lan}},
		}}, tcp(evil, lanHost, 5000, 80, true, false), false},
		{"rule destination narrower than the network", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{{Dests: []netip.Prefix{netip.MustParsePrefix("192.168.50.20/32")}, Accept: true}}}, tcp(peer, lanHost, 5000, 80, true, false), false},
		{"domain rule not resolved yet", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{{Accept: true}}}, tcp(peer, lanHost, 5000, 80, true, false), false},
		{"exit node, IPv6", Routing{Networks: []netip.Prefix{netip.MustParsePrefix("::/0")}, Rules: []RouteRule{{Dests: []netip.Prefix{netip.MustParsePrefix("::/0")}, Accept: true, Proto: ProtoTCP, PortLo: 443, PortHi: 443}}},
			tcp6(netip.MustParseAddr("fd00::2"), netip.MustParseAddr("2001:db8::1"), 5000, 443), true},
		{"exit node, IPv6, other port", Routing{Networks: []netip.Prefix{netip.MustParsePrefix("::/0")}, Rules: []RouteRule{{Dests: []netip.Prefix{netip.MustParsePrefix("::/0")}, Accept: true, Proto: ProtoTCP, PortLo: 443, PortHi: 443}}},
			tcp6(netip.MustParseAddr("fd00::2"), netip.MustParseAddr("2001:db8::1"), 5000, 80), false},
		{"for this host: peer rules, not route rules", Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{web}}, tcp(evil, me, 5000, 22, true, false), true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := routingFilter(tc.r).Inbound(tc.pkt); got != tc.want {
				t.Errorf("Inbound: got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestForwardStateful: an accepted forwarded flow's later packets pass
// after the rules change; the LAN's replies (the host's Outbound) pass; a
// flow the LAN opens towards a peer gets that peer's replies back.
func TestForwardStateful(t *testing.T) {
	now := time.Unix(1000, 0)
	f := routingFilter(Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{{Dests: []netip.Prefix{lan}, Accept: true, Proto: ProtoTCP, PortLo: 80, PortHi: 80}}})
	f.now = func() time.Time { return now }
	if !f.Inbound(tcp(peer, lanHost, 5000, 80, true, false)) {
		t.Fatal("allowed SYN refused")
	}
	if !f.Outbound(tcp(lanHost, peer, 80, 5000, true, true)) {
		t.Fatal("the LAN's SYN-ACK refused")
	}
	f.SetRouting(Routing{Networks: []netip.Prefix{lan}, Rules: []RouteRule{{Dests: []netip.Prefix{lan}, Accept: true, Proto: ProtoUDP}}})
	if !f.Inbound(tcp(peer, lanHost, 5000, 80, false, true)) {
		t.Error("an established forwarded flow was cut by a rule change")
	}
	if f.Inbound(tcp(peer, lanHost, 5001, 80, true, false)) {
		t.Error("a new flow passed rules that no longer allow it")
	}
	// The LAN opens a flow to the peer (the host's outbound path); the
	// peer's replies come back although no rule allows the peer in.
	if !f.Outbound(tcp(lanHost, peer, 40000, 22, true, false)) {
		t.Fatal("outbound refused")
	}
	if !f.Inbound(tcp(peer, lanHost, 22, 40000, false, true)) {
		t.Error("reply to a LAN-opened flow refused")
	}
	now = now.Add(tcpIdle + time.Second)
	if f.Inbound(tcp(peer, lanHost, 5000, 80, false, true)) {
		t.Error("an idle flow is still tracked after its timeout")
	}
}

// TestRoutedReplies is the client's side: replies from a routed network
// (sources outside the overlay) pass only for flows this host opened,
// whatever the allow-all peer rules say.
func TestRoutedReplies(t *testing.T) {
	for _, allowAll := range []bool{true, false} {
		f := New()
		f.SetOverlay(me, overlay)
		var rules []Rule
		if !allowAll {
			rules = []Rule{{Inbound: true, Accept: true, Proto: ProtoTCP}} // any peer, tcp
		}
		f.SetRules(rules, allowAll)
		if !f.Outbound(tcp(me, lanHost, 41000, 443, true, false)) {
			t.Fatal("outbound refused")
		}
		if !f.Inbound(tcp(lanHost, me, 443, 41000, true, true)) {
			t.Errorf("allowAll=%v: reply from the routed network refused", allowAll)
		}
		if f.Inbound(tcp(lanHost, me, 443, 41001, false, true)) {
			t.Errorf("allowAll=%v: packet of a flow this host never opened accepted", allowAll)
		}
		if f.Inbound(tcp(lanHost, me, 5000, 22, true, false)) {
			t.Errorf("allowAll=%v: unsolicited connection from the routed network accepted", allowAll)
		}
		if !f.Outbound(echo(me, lanHost, false, 9)) || !f.Inbound(echo(lanHost, me, true, 9)) {
			t.Errorf("allowAll=%v: ping reply from the routed network refused", allowAll)
		}
		if !f.Inbound(tcp(peer, me, 5000, 22, true, false)) {
			t.Errorf("allowAll=%v: a peer allowed by the peer rules refused", allowAll)
		}
	}
}
