package acl

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"
)

// rtEcho6 is an ICMPv6 echo request from src to dst.
func rtEcho6(src, dst netip.Addr, id uint16) []byte {
	b := make([]byte, 48)
	b[0], b[6] = 0x60, 58
	s, d := src.As16(), dst.As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	b[40] = 128
	binary.BigEndian.PutUint16(b[44:46], id)
	return b
}

// TestForwardIPv6ExitNode: a dual-stack exit node under NetBird's route
// firewall rules (an IPv4 rule and its IPv6 twin naming the peer's
// /128): the peer's IPv6 traffic to the internet passes, another IPv6
// source does not, ICMP rules cover ICMPv6, a port rule holds for IPv6,
// and without ::/0 served no IPv6 is forwarded at all.
func TestForwardIPv6ExitNode(t *testing.T) {
	pfx := netip.MustParsePrefix
	any4, any6 := pfx("0.0.0.0/0"), pfx("::/0")
	ov6 := pfx("fd00:77::/64")
	me6, peer6, evil6 := netip.MustParseAddr("fd00:77::1"), netip.MustParseAddr("fd00:77::2"), netip.MustParseAddr("fd00:77::3")
	far4, far6 := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8:6::100")
	rules := []RouteRule{
		{Sources: []netip.Prefix{netip.PrefixFrom(peer, 32)}, Dests: []netip.Prefix{any4}, Accept: true},
		{Sources: []netip.Prefix{netip.PrefixFrom(peer6, 128)}, Dests: []netip.Prefix{any6}, Accept: true},
	}
	smtp := []RouteRule{
		{Sources: []netip.Prefix{ov6}, Dests: []netip.Prefix{any6}, Proto: ProtoTCP, PortLo: 25, PortHi: 25},
		{Sources: []netip.Prefix{ov6}, Dests: []netip.Prefix{any6}, Accept: true},
	}
	icmp := []RouteRule{{Sources: []netip.Prefix{ov6}, Dests: []netip.Prefix{any6}, Accept: true, Proto: ProtoICMP}}
	both := []netip.Prefix{any4, any6}
	for _, tc := range []struct {
		name string
		r    Routing
		pkt  []byte
		want bool
	}{
		{"peer over IPv6", Routing{Networks: both, Rules: rules}, tcp6(peer6, far6, 5000, 443), true},
		{"peer over IPv4", Routing{Networks: both, Rules: rules}, tcp(peer, far4, 5000, 443, true, false), true},
		{"another IPv6 source", Routing{Networks: both, Rules: rules}, tcp6(evil6, far6, 5000, 443), false},
		{"the peer's IPv4 rule opens no IPv6", Routing{Networks: both, Rules: rules[:1]}, tcp6(peer6, far6, 5000, 443), false},
		{"::/0 not served: no IPv6 forwarded", Routing{Networks: both[:1], AllowAll: true}, tcp6(peer6, far6, 5000, 443), false},
		{"drop rule for a port first", Routing{Networks: both, Rules: smtp}, tcp6(peer6, far6, 5000, 25), false},
		{"other ports pass", Routing{Networks: both, Rules: smtp}, tcp6(peer6, far6, 5000, 587), true},
		{"ICMP rule covers ICMPv6 echo", Routing{Networks: both, Rules: icmp}, rtEcho6(peer6, far6, 9), true},
		{"ICMP rule opens no TCP", Routing{Networks: both, Rules: icmp}, tcp6(peer6, far6, 5000, 80), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewWithOptions(Options{HostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{me, me6}, nil }})
			f.SetOverlay(me, overlay)
			f.SetOverlay6(me6, ov6)
			f.SetRules(nil, true)
			f.SetRouting(tc.r)
			if got := f.Inbound(tc.pkt); got != tc.want {
				t.Errorf("Inbound: got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestForwardNeverToPeers: an exit node's 0.0.0.0/0 and ::/0 contain the
// overlays, but a packet from one peer to another peer's overlay address
// is never forwarded (it would reach a peer that management left out of
// the sender's map), under allow-all and under a rule naming the sender;
// the internet still passes.
func TestForwardNeverToPeers(t *testing.T) {
	pfx := netip.MustParsePrefix
	any4, any6 := pfx("0.0.0.0/0"), pfx("::/0")
	ov6 := pfx("fd00:77::/64")
	me6, peer6, other6 := netip.MustParseAddr("fd00:77::1"), netip.MustParseAddr("fd00:77::2"), netip.MustParseAddr("fd00:77::9")
	other4 := netip.MustParseAddr("100.70.0.9")
	far4, far6 := netip.MustParseAddr("198.51.100.7"), netip.MustParseAddr("2001:db8:6::100")
	both := []netip.Prefix{any4, any6}
	rules := []RouteRule{
		{Sources: []netip.Prefix{netip.PrefixFrom(peer, 32)}, Dests: []netip.Prefix{any4}, Accept: true},
		{Sources: []netip.Prefix{netip.PrefixFrom(peer6, 128)}, Dests: []netip.Prefix{any6}, Accept: true},
	}
	for _, r := range []Routing{{Networks: both, AllowAll: true}, {Networks: both, Rules: rules}} {
		for _, tc := range []struct {
			name string
			pkt  []byte
			want bool
		}{
			{"IPv4 internet", tcp(peer, far4, 5000, 443, true, false), true},
			{"IPv6 internet", tcp6(peer6, far6, 5000, 443), true},
			{"another peer over IPv4", tcp(peer, other4, 5000, 443, true, false), false},
			{"another peer over IPv6", tcp6(peer6, other6, 5000, 443), false},
			{"another peer, ICMPv6 echo", rtEcho6(peer6, other6, 3), false},
		} {
			t.Run(fmt.Sprintf("allowAll=%v/%s", r.AllowAll, tc.name), func(t *testing.T) {
				f := NewWithOptions(Options{HostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{me, me6}, nil }})
				f.SetOverlay(me, overlay)
				f.SetOverlay6(me6, ov6)
				f.SetRules(nil, true)
				f.SetRouting(r)
				if got := f.Inbound(tc.pkt); got != tc.want {
					t.Errorf("Inbound: got %v, want %v", got, tc.want)
				}
			})
		}
	}
}
