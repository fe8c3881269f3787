package engine

import (
	"context"
	"errors"
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
	"github.com/wiremesh/wiremesh/client/dnsfwd"
	"github.com/wiremesh/wiremesh/client/forward"
	"github.com/wiremesh/wiremesh/client/routes"
	"github.com/wiremesh/wiremesh/internal/key"
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

// loopBind binds the DNS forwarder to a free port of 127.0.0.1 (whatever
// port the map says), recording it.
type loopBind struct {
	mu   sync.Mutex
	fail error // set: binding fails (a port held by mDNS)
	at   netip.AddrPort
}

func (b *loopBind) bind(netip.AddrPort) (net.PacketConn, net.Listener, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.fail != nil {
		return nil, nil, b.fail
	}
	pc, ln, err := dnsfwd.Bind(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		return nil, nil, err
	}
	b.at = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	return pc, ln, nil
}

func (b *loopBind) addr() netip.AddrPort {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.at
}

// testDNSRoutes is a routing peer's serverRoutes with a DNS forwarder
// bound by b and the engine's route loop applying what it learns, until
// the test ends.
func testDNSRoutes(t *testing.T, fw ruleSetter, b *loopBind, lookup dnsfwd.LookupFunc) *serverRoutes {
	t.Helper()
	s := &serverRoutes{log: slog.New(slog.DiscardHandler), fw: fw, fwd: testForwarder(t), dnsBind: b.bind,
		learned: newCoalescer(), learnedWait: time.Minute, dnsLookup: lookup} // a minute: the answer always waits for the loop
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // the engine's route loop
		defer wg.Done()
		for {
			select {
			case <-ctx.Done():
				return
			case <-s.learned.ready():
				s.learned.run(s.relearn)
			}
		}
	}()
	t.Cleanup(func() {
		s.close()
		cancel()
		wg.Wait()
	})
	return s
}

func domainMap(self string, on bool) *mgmtpb.NetworkMap {
	domains := []string{"*.svc.corp.test"}
	return &mgmtpb.NetworkMap{
		PeerConfig: &mgmtpb.PeerConfig{RoutingPeerDnsResolutionEnabled: on},
		Routes:     []*mgmtpb.Route{{ID: "res1", NetID: "corp", NetworkType: netTypeDomain, Domains: domains, Peer: self, Masquerade: true}},
		RoutesFirewallRules: []*mgmtpb.RouteFirewallRule{{SourceRanges: []string{"127.0.0.2/32"}, Action: mgmtpb.RuleAction_ACCEPT,
			Protocol: mgmtpb.RuleProtocol_TCP, IsDynamic: true, Domains: domains, RouteID: "res1",
			PortInfo: &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Port{Port: 443}}}},
	}
}

func dbLookup(_ context.Context, network, host string) ([]netip.Addr, error) {
	if host == "db.svc.corp.test" && network == "ip4" {
		return []netip.Addr{netip.MustParseAddr("10.20.0.6")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// askFrom asks the forwarder at ap from the local address from.
func askFrom(from string, ap netip.AddrPort, name string, timeout time.Duration) (*dns.Msg, error) {
	c := &dns.Client{Timeout: timeout, Dialer: &net.Dialer{Timeout: timeout, LocalAddr: &net.UDPAddr{IP: net.ParseIP(from)}}}
	q := new(dns.Msg)
	q.SetQuestion(name, dns.TypeA)
	m, _, err := c.Exchange(q, ap.String())
	return m, err
}

// TestRoutingPeerDNS: a routing peer of a domain resource, with routing
// peer DNS resolution on, answers the resource's names on its overlay
// address, and its route firewall then routes to exactly the answered
// addresses (the policy's rule narrowed to them); names of no resource are
// refused; with the setting off the forwarder stops and the domain route
// forwards anywhere the rules allow, as before.
func TestRoutingPeerDNS(t *testing.T) {
	fw := &lockedFirewall{}
	b := &loopBind{}
	s := testDNSRoutes(t, fw, b, dbLookup)
	self := mustKey(t)
	addr := netip.MustParsePrefix("127.0.0.1/8")
	nm := domainMap(self.String(), true)
	s.apply(self, addr, nm)
	if got := fw.last(); len(got.Networks) != 0 || len(got.Rules) != 1 || len(got.Rules[0].Dests) != 0 {
		t.Fatalf("before any answer the filter routes %+v, want nothing", got)
	}
	port := b.addr().Port()
	wantRules := []acl.Rule{
		{Peer: netip.MustParseAddr("127.0.0.2"), Inbound: true, Accept: true, Proto: acl.ProtoUDP, PortLo: port, PortHi: port},
		{Peer: netip.MustParseAddr("127.0.0.2"), Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: port, PortHi: port},
	}
	if d := cmp.Diff(wantRules, dnsForwarderRules(s), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("forwarder firewall rules: only the route's sources, on the port listened on (-want +got):\n%s", d)
	}

	m, err := askFrom("127.0.0.2", b.addr(), "db.svc.corp.test.", 5*time.Second)
	if err != nil || m.Rcode != dns.RcodeSuccess || len(m.Answer) != 1 {
		t.Fatalf("routed name: %v %v", m, err)
	}
	// The answer came after the firewall took the address (the answer
	// waits up to learnedWait, a minute here, for the route loop).
	host := netip.MustParsePrefix("10.20.0.6/32")
	want := acl.Routing{Networks: []netip.Prefix{host}, Rules: []acl.RouteRule{{Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.2/32")},
		Dests: []netip.Prefix{host}, Accept: true, Proto: acl.ProtoTCP, PortLo: 443, PortHi: 443}}}
	if d := cmp.Diff(want, fw.last(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Fatalf("routing after the answer (-want +got):\n%s", d)
	}
	if m, err := askFrom("127.0.0.2", b.addr(), "www.example.com.", 5*time.Second); err != nil || m.Rcode != dns.RcodeRefused {
		t.Fatalf("unrelated name: %v %v, want REFUSED", m, err)
	}
	// A peer without a policy to the resource may not ask about it.
	if m, err := askFrom("127.0.0.3", b.addr(), "db.svc.corp.test.", 5*time.Second); err != nil || m.Rcode != dns.RcodeRefused {
		t.Fatalf("a source the route does not accept: %v %v, want REFUSED", m, err)
	}

	nm = domainMap(self.String(), false)
	s.apply(self, addr, nm)
	if got := fw.last(); len(got.Networks) != 1 || got.Networks[0] != netip.MustParsePrefix("0.0.0.0/0") {
		t.Fatalf("setting off: filter routes %v, want any destination", got.Networks)
	}
	if _, err := askFrom("127.0.0.2", b.addr(), "db.svc.corp.test.", 300*time.Millisecond); err == nil {
		t.Fatal("the forwarder still answers with the setting off")
	}
	if rs := dnsForwarderRules(s); len(rs) != 0 {
		t.Errorf("forwarder firewall rules with the setting off: %+v", rs)
	}
}

// TestRoutingPeerDNSFailsClosed: when the DNS forwarder cannot listen (a
// port held by mDNS), its domain routes let nothing through (not any
// destination), no port is opened to the peers, and it listens once the
// port is free again.
func TestRoutingPeerDNSFailsClosed(t *testing.T) {
	fw := &lockedFirewall{}
	b := &loopBind{fail: errors.New("address already in use")}
	s := testDNSRoutes(t, fw, b, dbLookup)
	self := mustKey(t)
	s.apply(self, netip.MustParsePrefix("127.0.0.1/8"), domainMap(self.String(), true))
	if got := fw.last(); len(got.Networks) != 0 || len(got.Rules) != 1 || len(got.Rules[0].Dests) != 0 {
		t.Fatalf("forwarder not listening: the filter routes %+v, want nothing", got)
	}
	if rs := dnsForwarderRules(s); len(rs) != 0 {
		t.Fatalf("firewall opens a port nothing of ours listens on: %+v", rs)
	}
	if s.retryDNS() {
		t.Fatal("retry reported listening while the port is still taken")
	}
	b.mu.Lock()
	b.fail = nil
	b.mu.Unlock()
	if !s.retryDNS() {
		t.Fatal("retry did not listen once the port was free")
	}
	if rs := dnsForwarderRules(s); len(rs) != 2 {
		t.Fatalf("forwarder firewall rules after the retry: %+v", rs)
	}
	if m, err := askFrom("127.0.0.2", b.addr(), "db.svc.corp.test.", 5*time.Second); err != nil || m.Rcode != dns.RcodeSuccess {
		t.Fatalf("after the retry: %v %v", m, err)
	}
	if got := fw.last(); len(got.Networks) != 1 || got.Networks[0] != netip.MustParsePrefix("10.20.0.6/32") {
		t.Fatalf("after an answer the filter routes %v, want the answered address", got.Networks)
	}
}

// TestUpstreamWithoutEngineLock: the resolver's callbacks do not take
// the engine's lock, which onSync holds while it closes a resolver that
// waits for them.
func TestUpstreamWithoutEngineLock(t *testing.T) {
	router := mustKey(t)
	mgr := routes.NewManager(routes.Config{System: &recordSystem{}})
	e := &Engine{log: slog.New(slog.DiscardHandler), routes: mgr,
		peers: map[key.Public]*remote{router: {ips: []netip.Prefix{netip.MustParsePrefix("100.70.0.9/32")}}}}
	nm := domainMap(router.String(), true)
	nm.DNSConfig = &mgmtpb.DNSConfig{ForwarderPort: 22054}
	rs := clientRoutes(nm, mustKey(t))
	mgr.Update(rs)
	e.mu.Lock()
	e.applyDomainRouting(nm)
	e.mu.Unlock()
	if _, err := mgr.Evaluate(context.Background(), func(key.Public) (routes.PeerConn, bool) { return routes.PeerConn{Connected: true}, true }, nil); err != nil {
		t.Fatal(err)
	}
	e.mu.Lock() // as onSync, closing a resolver
	defer e.mu.Unlock()
	got := make(chan netip.AddrPort, 1)
	go func() { ap, _ := domainRouter{e}.Upstream("db.svc.corp.test"); got <- ap }()
	select {
	case ap := <-got:
		if ap != netip.MustParseAddrPort("100.70.0.9:22054") {
			t.Fatalf("Upstream = %v, want the routing peer's forwarder", ap)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Upstream blocks on the engine's lock")
	}
}
