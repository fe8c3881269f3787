package acl

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

var (
	overlay6 = netip.MustParsePrefix("fd00:aaaa:bbbb:cccc::/64")
	me6      = netip.MustParseAddr("fd00:aaaa:bbbb:cccc::1")
	peer6    = netip.MustParseAddr("fd00:aaaa:bbbb:cccc::2")
	evil6    = netip.MustParseAddr("fd00:aaaa:bbbb:cccc::3")
	far6     = netip.MustParseAddr("2001:db8::9")
)

func ipv6(next uint8, src, dst netip.Addr, l4 []byte) []byte {
	b := make([]byte, 40+len(l4))
	b[0], b[6], b[7] = 0x60, next, 64
	binary.BigEndian.PutUint16(b[4:6], uint16(len(l4)))
	s, d := src.As16(), dst.As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	copy(b[40:], l4)
	return b
}

func tcpV6(src, dst netip.Addr, sport, dport uint16, syn, ack bool) []byte {
	l4 := make([]byte, 20)
	binary.BigEndian.PutUint16(l4[0:2], sport)
	binary.BigEndian.PutUint16(l4[2:4], dport)
	if syn {
		l4[13] |= 0x02
	}
	if ack {
		l4[13] |= 0x10
	}
	return ipv6(ProtoTCP, src, dst, l4)
}

func echo6(src, dst netip.Addr, reply bool, id uint16) []byte {
	l4 := make([]byte, 8)
	l4[0] = 128
	if reply {
		l4[0] = 129
	}
	binary.BigEndian.PutUint16(l4[4:6], id)
	return ipv6(protoICMPv6, src, dst, l4)
}

// v6Filter is a peer on both overlays whose rules are the IPv6 twins of
// what management sends for "peer may ping me and reach tcp/80".
func v6Filter(rules []Rule, allowAll bool) *Filter {
	f := NewWithOptions(Options{HostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{me, me6}, nil }})
	f.SetOverlay(me, overlay)
	f.SetOverlay6(me6, overlay6)
	f.SetRules(rules, allowAll)
	return f
}

// TestInboundV6: the peer rules apply to IPv6 packets as to IPv4 ones,
// ICMPv6 is the rules' ICMP, and the default is deny.
func TestInboundV6(t *testing.T) {
	rules := []Rule{
		{Peer: peer6, Inbound: true, Accept: true, Proto: ProtoICMP},
		{Peer: peer6, Inbound: true, Accept: true, Proto: ProtoTCP, PortLo: 80, PortHi: 80},
		{Peer: peer, Inbound: true, Accept: true, Proto: ProtoTCP, PortLo: 80, PortHi: 80},
	}
	tests := []struct {
		name     string
		rules    []Rule
		allowAll bool
		pkt      []byte
		want     bool
	}{
		{"echo from the allowed peer", rules, false, echo6(peer6, me6, false, 7), true},
		{"tcp/80 from the allowed peer", rules, false, tcpV6(peer6, me6, 40000, 80, true, false), true},
		{"tcp/22 not allowed", rules, false, tcpV6(peer6, me6, 40000, 22, true, false), false},
		{"another peer", rules, false, tcpV6(evil6, me6, 40000, 80, true, false), false},
		{"the v4 rule does not open v6", []Rule{rules[2]}, false, tcpV6(peer6, me6, 40000, 80, true, false), false},
		{"the v6 rule does not open v4", rules[:2], false, tcp(peer, me, 40000, 80, true, false), false},
		{"unsolicited echo reply", rules, false, echo6(peer6, me6, true, 7), false},
		{"no rules: default deny", nil, false, echo6(peer6, me6, false, 7), false},
		{"any-peer icmp rule", []Rule{{Inbound: true, Accept: true, Proto: ProtoICMP}}, false, echo6(evil6, me6, false, 7), true},
		{"allow all", nil, true, tcpV6(evil6, me6, 40000, 22, true, false), true},
		{"allow all, source outside the overlay", nil, true, tcpV6(far6, me6, 40000, 22, true, false), false},
		{"drop rule beats allow all", []Rule{{Peer: evil6, Inbound: true, Proto: ProtoTCP, PortLo: 22, PortHi: 22}}, true, tcpV6(evil6, me6, 40000, 22, true, false), false},
		{"truncated", rules, false, ipv6(ProtoTCP, peer6, me6, nil)[:39], false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := v6Filter(tt.rules, tt.allowAll).Inbound(tt.pkt); got != tt.want {
				t.Fatalf("Inbound = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestV6Replies: what this host opens over IPv6 gets its replies back,
// while a peer's new connection still needs a rule.
func TestV6Replies(t *testing.T) {
	f := v6Filter(nil, false)
	if !f.Outbound(tcpV6(me6, peer6, 50000, 443, true, false)) || !f.Outbound(echo6(me6, peer6, false, 9)) {
		t.Fatal("outbound refused without drop rules")
	}
	if !f.Inbound(tcpV6(peer6, me6, 443, 50000, true, true)) {
		t.Fatal("SYN-ACK answering our connection dropped")
	}
	if !f.Inbound(echo6(peer6, me6, true, 9)) {
		t.Fatal("echo reply to our ping dropped")
	}
	if f.Inbound(echo6(peer6, me6, true, 10)) {
		t.Fatal("echo reply with another identifier passed")
	}
	if f.Inbound(tcpV6(peer6, me6, 443, 50001, true, false)) {
		t.Fatal("new connection from the peer passed without a rule")
	}
	f.SetRules([]Rule{{Peer: peer6, Proto: ProtoTCP, PortLo: 443, PortHi: 443}}, false)
	if f.Outbound(tcpV6(me6, peer6, 50002, 443, true, false)) {
		t.Fatal("outbound drop rule ignored for IPv6")
	}
}

// TestNoV6Overlay: a peer without an IPv6 overlay address (IPv6
// disabled) admits no IPv6 peer, whatever allow-all says, but still the
// replies to what it opened.
func TestNoV6Overlay(t *testing.T) {
	f := NewWithOptions(Options{HostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{me}, nil }})
	f.SetOverlay(me, overlay)
	f.SetRules(nil, true)
	if !f.Inbound(tcp(peer, me, 1000, 22, true, false)) {
		t.Fatal("IPv4 peer refused under allow all")
	}
	// Not this host's: judged as forwarded traffic, and nothing is routed.
	if f.Inbound(tcpV6(peer6, me6, 1000, 22, true, false)) {
		t.Fatal("IPv6 packet admitted without an IPv6 overlay")
	}
	f.SetOverlay6(me6, overlay6)
	if !f.Inbound(tcpV6(peer6, me6, 1000, 22, true, false)) {
		t.Fatal("IPv6 peer refused under allow all once the overlay is known")
	}
	f.SetOverlay6(netip.Addr{}, netip.Prefix{})
	if f.Inbound(tcpV6(peer6, me6, 1000, 22, true, false)) {
		t.Fatal("IPv6 peer admitted after the IPv6 address was removed")
	}
}
