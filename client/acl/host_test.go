package acl

import (
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"
)

var (
	hostLAN    = netip.MustParseAddr("192.168.50.1") // the routing peer's own LAN address
	hostPublic = netip.MustParseAddr("203.0.113.7")
	internet   = netip.MustParseAddr("198.51.100.20")
	anyV4      = netip.MustParsePrefix("0.0.0.0/0")
)

// fakeHost is an injected address source whose answer a test changes.
type fakeHost struct {
	mu    sync.Mutex
	addrs []netip.Addr
	err   error
	calls int
}

func (h *fakeHost) list() ([]netip.Addr, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls++
	return append([]netip.Addr(nil), h.addrs...), h.err
}

func (h *fakeHost) set(err error, addrs ...netip.Addr) {
	h.mu.Lock()
	h.addrs, h.err = addrs, err
	h.mu.Unlock()
}

// exitNode is a routing peer serving 0.0.0.0/0 and lan to every peer,
// whose peer rules let only peer reach it, on port 22.
func exitNode(t *testing.T, h *fakeHost, now *time.Time) *Filter {
	t.Helper()
	f := NewWithOptions(Options{HostAddrs: h.list, Now: func() time.Time { return *now }})
	f.SetOverlay(me, overlay)
	f.SetRules([]Rule{{Peer: peer, Inbound: true, Accept: true, Proto: ProtoTCP, PortLo: 22, PortHi: 22}}, false)
	f.SetRouting(Routing{Networks: []netip.Prefix{anyV4, lan}, Rules: []RouteRule{{Dests: []netip.Prefix{anyV4}, Accept: true}}})
	return f
}

// TestHostAddressesUsePeerRules: a routing peer's own non-overlay
// addresses are this host; the route rules (here an exit node open to
// every peer) must not open them to peers the peer rules refuse.
func TestHostAddressesUsePeerRules(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &fakeHost{}
	h.set(nil, me, hostLAN, hostPublic, netip.MustParseAddr("fe80::1"))
	f := exitNode(t, h, &now)
	tests := []struct {
		name string
		pkt  []byte
		want bool
	}{
		{"refused peer to the host's LAN address", tcp(evil, hostLAN, 5000, 22, true, false), false},
		{"refused peer to the host's public address", tcp(evil, hostPublic, 5000, 8080, true, false), false},
		{"allowed peer to the host's LAN address", tcp(peer, hostLAN, 5000, 22, true, false), true},
		{"allowed peer, port the peer rules do not open", tcp(peer, hostPublic, 5000, 80, true, false), false},
		{"refused peer through the exit node", tcp(evil, internet, 5000, 443, true, false), true},
		{"refused peer to another LAN host", tcp(evil, lanHost, 5000, 443, true, false), true},
		{"refused peer to the overlay address", tcp(evil, me, 5000, 22, true, false), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.Inbound(tc.pkt); got != tc.want {
				t.Errorf("Inbound: got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHostAddressesRefresh: an address the host gains later is the
// host's within hostEvery; a failing source keeps the last list and is
// not asked again on every packet.
func TestHostAddressesRefresh(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &fakeHost{}
	h.set(nil, me, hostLAN)
	f := exitNode(t, h, &now)
	docker := netip.MustParseAddr("172.17.0.1")
	if !f.Inbound(tcp(evil, docker, 5000, 80, true, false)) {
		t.Fatal("before the host has it, the address is forwarded like any other")
	}
	h.set(nil, me, hostLAN, docker)
	now = now.Add(hostEvery + time.Millisecond)
	if f.Inbound(tcp(evil, docker, 5000, 80, true, false)) {
		t.Fatal("a new host address was still forwarded after the refresh interval")
	}
	// The source fails: the list stays, and the next attempt waits.
	h.set(errors.New("netlink busy"))
	now = now.Add(hostEvery + time.Millisecond)
	calls := h.calls
	for i := 0; i < 10; i++ {
		if f.Inbound(tcp(evil, hostLAN, 5000, 80, true, false)) {
			t.Fatal("host address forgotten when the source failed")
		}
	}
	if h.calls-calls != 1 {
		t.Errorf("failing source asked %d times for 10 packets, want 1", h.calls-calls)
	}
	// A map apply refreshes at once.
	h.set(nil, me)
	f.SetRouting(Routing{Networks: []netip.Prefix{anyV4}, Rules: []RouteRule{{Dests: []netip.Prefix{anyV4}, Accept: true}}})
	if !f.Inbound(tcp(evil, hostLAN, 5000, 80, true, false)) {
		t.Error("an address the host gave up is still treated as the host's after a map apply")
	}
}

// TestFlowTableCap: forwarded flows fill the table only up to their
// share; the rest is counted, later packets of untracked flows still pass
// the rules, and the host's own flows keep their reserve.
func TestFlowTableCap(t *testing.T) {
	now := time.Unix(1000, 0)
	h := &fakeHost{}
	h.set(nil, me)
	f := NewWithOptions(Options{HostAddrs: h.list, Now: func() time.Time { return now }, MaxFlows: 32})
	f.SetOverlay(me, overlay)
	f.SetRules(nil, false) // no peer may open anything to this host
	f.SetRouting(Routing{Networks: []netip.Prefix{anyV4}, Rules: []RouteRule{{Dests: []netip.Prefix{anyV4}, Accept: true, Proto: ProtoTCP}}})
	for i := 0; i < 100; i++ {
		if !f.Inbound(tcp(evil, internet, uint16(10000+i), 443, true, false)) {
			t.Fatalf("SYN %d refused", i)
		}
	}
	if n := len(f.flows); n != 30 {
		t.Fatalf("table holds %d flows after 100 forwarded SYNs, want the forwarded share 30", n)
	}
	if n := f.UntrackedFlows(); n != 70 {
		t.Errorf("UntrackedFlows = %d, want 70", n)
	}
	// An untracked forwarded flow still works: the rules pass its next
	// packets, and the far end's replies go into the tunnel.
	if !f.Inbound(tcp(evil, internet, 10099, 443, false, true)) || !f.Outbound(tcp(internet, evil, 443, 10099, true, true)) {
		t.Error("an untracked forwarded flow was broken")
	}
	// The LAN answering counts against the forwarded share too.
	if len(f.flows) != 30 {
		t.Errorf("table grew to %d on forwarded replies", len(f.flows))
	}
	// The host's own connection uses the reserve: its reply comes back
	// although no peer rule admits it.
	if !f.Outbound(tcp(me, peer, 41000, 22, true, false)) || !f.Inbound(tcp(peer, me, 22, 41000, true, true)) {
		t.Error("the host's own flow was not tracked with the table full of forwarded flows")
	}
	// Idle flows expire and make room again.
	now = now.Add(tcpIdle + time.Minute)
	if !f.Inbound(tcp(evil, internet, 20000, 443, true, false)) {
		t.Fatal("SYN refused")
	}
	if _, ok := f.flows[flow{proto: ProtoTCP, local: internet, remote: evil, lport: 443, rport: 20000}]; !ok {
		t.Error("a new forwarded flow was not tracked after the old ones expired")
	}
}
