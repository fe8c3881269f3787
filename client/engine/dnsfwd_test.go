package engine

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/forward"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// lockedFirewall records the routing applied, from any goroutine.
type lockedFirewall struct {
	mu      sync.Mutex
	routing []acl.Routing
}

func (f *lockedFirewall) SetRules([]acl.Rule, bool)           {}
func (f *lockedFirewall) SetOverlay(netip.Addr, netip.Prefix) {}
func (f *lockedFirewall) close()                              {}
func (f *lockedFirewall) SetRouting(r acl.Routing) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.routing = append(f.routing, r)
}

func (f *lockedFirewall) last() acl.Routing {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.routing) == 0 {
		return acl.Routing{}
	}
	return f.routing[len(f.routing)-1]
}

func testForwarder(t *testing.T) *forward.Forwarder {
	t.Helper()
	proc := t.TempDir()
	for _, k := range []string{"sys/net/ipv4/ip_forward", "sys/net/ipv6/conf/all/forwarding"} {
		if err := os.MkdirAll(filepath.Join(proc, filepath.Dir(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, k), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fwd, err := forward.New(forward.Options{Interface: "wt9", ProcRoot: proc, NAT: &fakeNAT{}, RemoveTable: func(string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	return fwd
}

func freeUDPPort(t *testing.T) uint16 {
	t.Helper()
	for {
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: p})
		if err == nil {
			u.Close()
			return uint16(p)
		}
	}
}

// TestRoutingPeerDNS: a routing peer of a domain resource, with routing
// peer DNS resolution on, answers the resource's names on its overlay
// address, and its route firewall then routes to exactly the answered
// addresses (the policy's rule narrowed to them); names of no resource are
// refused; with the setting off the forwarder stops and the domain route
// forwards anywhere the rules allow, as before.
func TestRoutingPeerDNS(t *testing.T) {
	fw := &lockedFirewall{}
	port := freeUDPPort(t)
	s := &serverRoutes{log: slog.New(slog.DiscardHandler), fw: fw, fwd: testForwarder(t), dnsPorts: []uint16{port}, learned: make(chan chan struct{}),
		dnsLookup: func(_ context.Context, network, host string) ([]netip.Addr, error) {
			if host == "db.svc.corp.test" && network == "ip4" {
				return []netip.Addr{netip.MustParseAddr("10.20.0.6")}, nil
			}
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}}
	defer s.close()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the engine's route loop
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case done := <-s.learned:
				s.relearn()
				close(done)
			}
		}
	}()
	defer wg.Wait()
	defer cancel()

	self := mustKey(t)
	addr := netip.MustParsePrefix("127.0.0.1/8")
	domains := []string{"*.svc.corp.test"}
	nm := &mgmtpb.NetworkMap{
		PeerConfig: &mgmtpb.PeerConfig{RoutingPeerDnsResolutionEnabled: true},
		Routes:     []*mgmtpb.Route{{ID: "res1", NetID: "corp", NetworkType: netTypeDomain, Domains: domains, Peer: self.String(), Masquerade: true}},
		RoutesFirewallRules: []*mgmtpb.RouteFirewallRule{{SourceRanges: []string{"100.70.0.2/32"}, Action: mgmtpb.RuleAction_ACCEPT,
			Protocol: mgmtpb.RuleProtocol_TCP, IsDynamic: true, Domains: domains, RouteID: "res1",
			PortInfo: &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Port{Port: 443}}}},
	}
	s.apply(self, addr, nm)
	if got := fw.last(); len(got.Networks) != 0 || len(got.Rules) != 1 || len(got.Rules[0].Dests) != 0 {
		t.Fatalf("before any answer the filter routes %+v, want nothing", got)
	}
	if rs := dnsForwarderRules(self.String(), nm, s); len(rs) != 2 {
		t.Errorf("forwarder firewall rules %+v, want UDP and TCP on the port", rs)
	}

	ask := func(name string) *dns.Msg {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		m, _, err := (&dns.Client{Timeout: 2 * time.Second}).Exchange(q, netip.AddrPortFrom(addr.Addr(), port).String())
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m := ask("db.svc.corp.test."); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("routed name: %v", m)
	}
	// The answer came after the firewall took the address.
	host := netip.MustParsePrefix("10.20.0.6/32")
	want := acl.Routing{Networks: []netip.Prefix{host}, Rules: []acl.RouteRule{{Sources: []netip.Prefix{netip.MustParsePrefix("100.70.0.2/32")},
		Dests: []netip.Prefix{host}, Accept: true, Proto: acl.ProtoTCP, PortLo: 443, PortHi: 443}}}
	if d := cmp.Diff(want, fw.last(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Fatalf("routing after the answer (-want +got):\n%s", d)
	}
	if m := ask("www.example.com."); m.Rcode != dns.RcodeRefused {
		t.Fatalf("unrelated name: rcode %s, want REFUSED", dns.RcodeToString[m.Rcode])
	}

	nm.PeerConfig.RoutingPeerDnsResolutionEnabled = false
	s.apply(self, addr, nm)
	if got := fw.last(); len(got.Networks) != 1 || got.Networks[0] != netip.MustParsePrefix("0.0.0.0/0") {
		t.Fatalf("setting off: filter routes %v, want any destination", got.Networks)
	}
	if _, _, err := (&dns.Client{Timeout: 300 * time.Millisecond}).Exchange(new(dns.Msg).SetQuestion("db.svc.corp.test.", dns.TypeA),
		netip.AddrPortFrom(addr.Addr(), port).String()); err == nil {
		t.Fatal("the forwarder still answers with the setting off")
	}
	if rs := dnsForwarderRules(self.String(), nm, s); len(rs) != 0 {
		t.Errorf("forwarder firewall rules with the setting off: %+v", rs)
	}
}
