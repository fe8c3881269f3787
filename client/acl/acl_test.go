package acl

import (
	"encoding/binary"
	"net/netip"
	"testing"
)

var (
	me   = netip.MustParseAddr("100.70.0.1")
	peer = netip.MustParseAddr("100.70.0.2")
	evil = netip.MustParseAddr("100.70.0.3")
)

func ipv4(proto uint8, src, dst netip.Addr, l4 []byte) []byte {
	b := make([]byte, 20+len(l4))
	b[0], b[9] = 0x45, proto
	binary.BigEndian.PutUint16(b[2:4], uint16(len(b)))
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	copy(b[20:], l4)
	return b
}

func tcp(src, dst netip.Addr, sport, dport uint16, syn, ack bool) []byte {
	l4 := make([]byte, 20)
	binary.BigEndian.PutUint16(l4[0:2], sport)
	binary.BigEndian.PutUint16(l4[2:4], dport)
	if syn {
		l4[13] |= 0x02
	}
	if ack {
		l4[13] |= 0x10
	}
	return ipv4(ProtoTCP, src, dst, l4)
}

func udp(src, dst netip.Addr, sport, dport uint16) []byte {
	l4 := make([]byte, 8)
	binary.BigEndian.PutUint16(l4[0:2], sport)
	binary.BigEndian.PutUint16(l4[2:4], dport)
	return ipv4(ProtoUDP, src, dst, l4)
}

func echo(src, dst netip.Addr, reply bool, id uint16) []byte {
	l4 := make([]byte, 8)
	l4[0] = 8
	if reply {
		l4[0] = 0
	}
	binary.BigEndian.PutUint16(l4[4:6], id)
	return ipv4(ProtoICMP, src, dst, l4)
}

func TestDefaultAllowsUntilRules(t *testing.T) {
	f := New()
	if !f.Inbound(tcp(peer, me, 5000, 80, true, false)) {
		t.Fatal("a fresh filter (no map yet) must not cut traffic")
	}
}

// TestSSHOnly is the scenario from B's side: A may open tcp/22 on
// B and nothing else; B may not open connections to A.
func TestSSHOnly(t *testing.T) {
	b := New()
	b.SetRules([]Rule{{Peer: peer, Inbound: true, Accept: true, Proto: ProtoTCP, PortLo: 22, PortHi: 22}}, false)
	if !b.Inbound(tcp(peer, me, 40000, 22, true, false)) {
		t.Fatal("A -> B tcp/22 refused")
	}
	if !b.Inbound(tcp(peer, me, 40000, 22, false, true)) {
		t.Fatal("A -> B tcp/22 data refused")
	}
	if b.Inbound(tcp(peer, me, 40000, 80, true, false)) {
		t.Fatal("A -> B tcp/80 accepted")
	}
	if b.Inbound(tcp(evil, me, 40000, 22, true, false)) {
		t.Fatal("another peer reached tcp/22")
	}
	if b.Inbound(echo(peer, me, false, 7)) {
		t.Fatal("ICMP echo accepted")
	}
	if b.Inbound(udp(peer, me, 5000, 22)) {
		t.Fatal("udp/22 accepted by a tcp rule")
	}
	// B's own outbound connection to A leaves B, but A (default deny) drops
	// it; replies to what B opened do come back through B's filter.
	if !b.Outbound(tcp(me, peer, 50000, 80, true, false)) {
		t.Fatal("outbound blocked without a drop rule")
	}
	if !b.Inbound(tcp(peer, me, 80, 50000, true, true)) {
		t.Fatal("reply (SYN-ACK) to B's own connection refused")
	}
	if b.Inbound(tcp(peer, me, 80, 50001, false, true)) {
		t.Fatal("a packet of a connection B never opened accepted")
	}
	if !b.Outbound(echo(me, peer, false, 9)) || !b.Inbound(echo(peer, me, true, 9)) {
		t.Fatal("reply to B's own ping refused")
	}
	if b.Inbound(echo(peer, me, true, 10)) {
		t.Fatal("unsolicited echo reply accepted")
	}
	if !b.Outbound(udp(me, peer, 5353, 53)) || !b.Inbound(udp(peer, me, 53, 5353)) {
		t.Fatal("UDP reply refused")
	}
}

func TestRangesDropsAndAllowAll(t *testing.T) {
	f := New()
	f.SetRules([]Rule{
		{Inbound: true, Accept: false, Proto: ProtoICMP},
		{Peer: peer, Inbound: true, Accept: true, Proto: ProtoUDP, PortLo: 1000, PortHi: 2000},
		{Peer: evil, Inbound: false, Accept: false, Proto: ProtoAny},
	}, false)
	if !f.Inbound(udp(peer, me, 1, 1500)) || f.Inbound(udp(peer, me, 1, 2001)) {
		t.Fatal("port range")
	}
	if f.Outbound(tcp(me, evil, 1, 2, true, false)) {
		t.Fatal("outbound drop rule ignored")
	}
	f.SetRules([]Rule{{Inbound: true, Accept: false, Proto: ProtoICMP}}, true)
	if !f.Inbound(tcp(evil, me, 1, 80, true, false)) {
		t.Fatal("allow-all refused tcp")
	}
	if f.Inbound(echo(peer, me, false, 1)) {
		t.Fatal("drop rule ignored beside allow-all")
	}
}

func TestMalformed(t *testing.T) {
	f := New()
	f.SetRules(nil, false)
	for _, b := range [][]byte{nil, {0x45}, make([]byte, 19), append([]byte{0x4f}, make([]byte, 30)...), {0x60, 0, 0, 0}} {
		if f.Inbound(b) {
			t.Fatalf("malformed %x accepted", b)
		}
	}
	// A later fragment carries no ports: only a port-less rule admits it.
	frag := udp(peer, me, 1, 22)
	binary.BigEndian.PutUint16(frag[6:8], 10)
	f.SetRules([]Rule{{Peer: peer, Inbound: true, Accept: true, Proto: ProtoUDP, PortLo: 22, PortHi: 22}}, false)
	if f.Inbound(frag) {
		t.Fatal("fragment matched a port rule")
	}
}

// FuzzInbound feeds arbitrary packets from the tunnel to the filter.
func FuzzInbound(f *testing.F) {
	f.Add(tcp(peer, me, 1, 22, true, false))
	f.Add(echo(peer, me, false, 1))
	f.Add(udp(peer, me, 1, 2))
	f.Add([]byte{0x45})
	f.Add(echo6(peer6, me6, false, 1))
	f.Add(tcpV6(peer6, me6, 1, 80, true, false))
	fl := New()
	fl.SetOverlay6(me6, overlay6)
	fl.SetRules([]Rule{{Peer: peer, Inbound: true, Accept: true, Proto: ProtoTCP, PortLo: 22, PortHi: 22}}, false)
	f.Fuzz(func(t *testing.T, b []byte) {
		fl.Inbound(b)
		fl.Outbound(b)
	})
}
