package acl

import (
	"net/netip"
	"testing"
)

// TestServices: the SSH server's ports open to map peers without a
// policy, and nothing else: not another port, not another address of
// this host (its LAN address, where the host's own sshd may listen), not
// a source outside the map, not UDP, not a peer an explicit drop rule
// names, and nothing once the server is off.
func TestServices(t *testing.T) {
	outsider := netip.MustParseAddr("100.70.0.9")              // in the overlay, not in the map
	outsider6 := netip.MustParseAddr("fd00:aaaa:bbbb:cccc::9") // the same on the IPv6 overlay
	f := v6Filter([]Rule{
		{Peer: peer, Inbound: true, Accept: true, Proto: ProtoTCP, PortLo: 80, PortHi: 80},
		{Peer: evil, Inbound: true, Accept: false, Proto: ProtoTCP, PortLo: 22, PortHi: 22},
	}, false)
	f.hosts.Store(&hostAddrs{at: f.now().Add(1 << 40), addrs: map[netip.Addr]struct{}{me: {}, me6: {}, hostLAN: {}}})
	svc := Services{
		Ports: []netip.AddrPort{netip.AddrPortFrom(me, 22), netip.AddrPortFrom(me, 22022), netip.AddrPortFrom(me6, 22)},
		Peers: []netip.Addr{peer, evil, peer6, lanHost},
	}
	f.SetServices(svc)
	cases := []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"map peer to the SSH port", tcp(peer, me, 40000, 22, true, false), true},
		{"map peer to the internal SSH port", tcp(peer, me, 40000, 22022, true, false), true},
		{"map peer, data of the connection", tcp(peer, me, 40000, 22, false, true), true},
		{"map peer over IPv6", tcpV6(peer6, me6, 40000, 22, true, false), true},
		{"map peer, a port no service holds", tcp(peer, me, 40000, 23, true, false), false},
		{"map peer, the internal port on IPv6 (not listened on)", tcpV6(peer6, me6, 40000, 22022, true, false), false},
		{"map peer, policy port still open", tcp(peer, me, 40000, 80, true, false), true},
		{"map peer, UDP to the SSH port", udp(peer, me, 5000, 22), false},
		{"map peer to this host's LAN address", tcp(peer, hostLAN, 40000, 22, true, false), false},
		{"peer an explicit drop rule names", tcp(evil, me, 40000, 22, true, false), false},
		{"overlay address not in the map", tcp(outsider, me, 40000, 22, true, false), false},
		{"IPv6 overlay address not in the map", tcpV6(outsider6, me6, 40000, 22, true, false), false},
		{"source outside the overlay, though listed", tcp(lanHost, me, 40000, 22, true, false), false},
	}
	for _, c := range cases {
		if got := f.Inbound(c.pkt); got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, got, c.want)
		}
	}
	f.SetServices(Services{})
	if f.Inbound(tcp(peer, me, 40001, 22, true, false)) || f.Inbound(tcpV6(peer6, me6, 40001, 22, true, false)) {
		t.Error("SSH port still open to a peer without a policy once the services are gone")
	}
	// No peer, or no port: nothing opens.
	f.SetServices(Services{Ports: svc.Ports})
	if f.Inbound(tcp(peer, me, 40002, 22, true, false)) {
		t.Error("open with no peer listed")
	}
}
