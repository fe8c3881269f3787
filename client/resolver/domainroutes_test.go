package resolver

import (
	"context"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// fakeDomainRoutes covers *.svc.corp.test and app.corp.test; the routing
// peer in use is fwd (zero: none chosen).
type fakeDomainRoutes struct {
	mu      sync.Mutex
	fwd     netip.AddrPort
	learned map[string][]netip.Addr
}

func (f *fakeDomainRoutes) Upstream(name string) (netip.AddrPort, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == "app.corp.test" || name == "svc.corp.test" || len(name) > len(".svc.corp.test") && name[len(name)-len(".svc.corp.test"):] == ".svc.corp.test" {
		return f.fwd, true
	}
	return netip.AddrPort{}, false
}

func (f *fakeDomainRoutes) Learned(_ context.Context, name string, addrs []netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.learned[name] = append(f.learned[name], addrs...)
}

// TestDomainRoutes: a name under a domain route goes to the routing
// peer's forwarder (never to the host's servers) and what it answers is
// learned before the reply; other names resolve as before; without a
// routing peer the name fails (SERVFAIL) rather than leak to the host's
// servers; the routes' domains become match domains of the host.
func TestDomainRoutes(t *testing.T) {
	peer := startUpstream(t, "10.20.0.6", nil)
	host := startUpstream(t, "192.0.2.9", nil)
	r := New(Options{})
	defer r.Close()
	r.SetUpstreams([]netip.AddrPort{host.addr})
	dr := &fakeDomainRoutes{fwd: peer.addr, learned: map[string][]netip.Addr{}}
	r.SetDomainRoutes(dr, []string{"app.corp.test", "*.svc.corp.test"})

	for _, name := range []string{"db.svc.corp.test.", "APP.corp.test.", "db.svc.corp.test."} {
		if got := firstA(query(r, name, dns.TypeA)); got != "10.20.0.6" {
			t.Fatalf("%s: answer %q, want the routing peer's 10.20.0.6", name, got)
		}
	}
	if peer.hits.Load() != 3 || host.hits.Load() != 0 {
		t.Fatalf("routing peer asked %d times (want 3: no cache), host %d (want 0)", peer.hits.Load(), host.hits.Load())
	}
	want := map[string][]netip.Addr{
		"db.svc.corp.test": {netip.MustParseAddr("10.20.0.6"), netip.MustParseAddr("10.20.0.6")},
		"app.corp.test":    {netip.MustParseAddr("10.20.0.6")},
	}
	dr.mu.Lock()
	d := cmp.Diff(want, dr.learned, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }))
	dr.mu.Unlock()
	if d != "" {
		t.Errorf("learned (-want +got):\n%s", d)
	}
	if got := firstA(query(r, "www.example.com.", dns.TypeA)); got != "192.0.2.9" {
		t.Errorf("other name: %q, want the host's answer", got)
	}
	hc := r.Config()
	if !slices.Contains(hc.MatchDomains(), "svc.corp.test") || !slices.Contains(hc.MatchDomains(), "app.corp.test") || len(hc.SearchDomains()) != 0 {
		t.Errorf("host config %+v: want the routes' domains as match domains only", hc)
	}

	dr.mu.Lock()
	dr.fwd = netip.AddrPort{}
	dr.mu.Unlock()
	hostHits := host.hits.Load()
	if m := query(r, "db.svc.corp.test.", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Errorf("no routing peer: rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	if host.hits.Load() != hostHits {
		t.Error("a routed name leaked to the host's servers")
	}

	r.SetDomainRoutes(nil, nil)
	if got := firstA(query(r, "db.svc.corp.test.", dns.TypeA)); got != "192.0.2.9" {
		t.Errorf("domain routes off: %q, want the host's answer", got)
	}
	if slices.Contains(r.Config().MatchDomains(), "svc.corp.test") {
		t.Error("domain routes off: still a match domain")
	}
}
