package routes

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
)

func addrList(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

// evaluator evaluates m with the routing peers connected as conns says
// at the time of each call.
func evaluator(t *testing.T, m *Manager, conns map[key.Public]PeerConn) func() Plan {
	return func() Plan {
		t.Helper()
		p, err := m.Evaluate(context.Background(), func(k key.Public) (PeerConn, bool) { c, ok := conns[k]; return c, ok }, nil)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
}

// learnMax learns MaxDomainNames names under corp.test, all at 10.20.0.6.
func learnMax(t *testing.T, m *Manager) {
	t.Helper()
	for i := range MaxDomainNames {
		if !m.Learn(string(rune('a'+i%26))+string(rune('a'+i/26))+".corp.test", addrList("10.20.0.6")) {
			t.Fatalf("name %d not learned", i)
		}
	}
}

// TestPeerResolvedDomains: with routing-peer DNS resolution, names are
// matched to the most specific selected domain route, its routing peer in
// use is the one to ask, the answers become routes through it, they move
// with the route when another routing peer takes over, and the agent
// itself looks nothing up.
func TestPeerResolvedDomains(t *testing.T) {
	a, b := testKey(t, 1), testKey(t, 2)
	sys := &fakeSystem{}
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	looked := 0
	m := NewManager(Config{System: sys, Now: clk.now, Lookup: func(context.Context, string) ([]netip.Addr, error) {
		looked++
		return addrList("203.0.113.1"), nil
	}})
	m.Update([]Route{
		{ID: "w:a", NetID: "corp", Domains: []string{"*.corp.test"}, Peer: a, Metric: 10},
		{ID: "w:b", NetID: "corp", Domains: []string{"*.corp.test"}, Peer: b, Metric: 20},
		{ID: "x", NetID: "app", Domains: []string{"app.corp.test"}, Peer: b, Metric: 10},
	})
	m.SetPeerResolved(true)
	conns := map[key.Public]PeerConn{a: up, b: up}
	eval := evaluator(t, m, conns)
	eval()
	cases := []struct {
		name       string
		peer       key.Public
		chosen, ok bool
	}{
		{"db.corp.test", a, true, true},
		{"corp.test", a, true, true},
		{"app.corp.test", b, true, true}, // the exact route wins over the wildcard
		{"other.test", key.Public{}, false, false},
		{"xcorp.test", key.Public{}, false, false},
	}
	for _, tc := range cases {
		p, chosen, ok := m.DomainPeer(tc.name)
		if p != tc.peer || chosen != tc.chosen || ok != tc.ok {
			t.Errorf("DomainPeer(%s) = %v %v %v, want %v %v %v", tc.name, p, chosen, ok, tc.peer, tc.chosen, tc.ok)
		}
	}
	if !m.Learn("db.corp.test", addrList("10.20.0.6", "127.0.0.1")) {
		t.Fatal("Learn reported no change")
	}
	if m.Learn("db.corp.test", addrList("10.20.0.6")) {
		t.Error("the same answer again reported a change")
	}
	if m.Learn("other.test", addrList("10.9.9.9")) {
		t.Error("a name of no route was learned")
	}
	plan := eval()
	if d := cmp.Diff(Plan{a: pfx("10.20.0.6/32")}, plan, cmpNet); d != "" {
		t.Fatalf("plan (-want +got):\n%s", d)
	}
	if d := cmp.Diff(pfx("10.20.0.6/32"), sys.installed, cmpNet); d != "" {
		t.Fatalf("installed (-want +got):\n%s", d)
	}
	// Failover: a leaves; the learned address moves to b.
	delete(conns, a)
	clk.t = clk.t.Add(10 * time.Second)
	eval()
	clk.t = clk.t.Add(10 * time.Second)
	plan = eval()
	if d := cmp.Diff(Plan{b: pfx("10.20.0.6/32")}, plan, cmpNet); d != "" {
		t.Fatalf("after failover (-want +got):\n%s", d)
	}
	if p, _, _ := m.DomainPeer("db.corp.test"); p != b {
		t.Errorf("after failover names go to %v, want b", p)
	}
	if d := cmp.Diff([]string{"db.corp.test"}, m.Reask()); d != "" {
		t.Errorf("names to ask the new routing peer (-want +got):\n%s", d)
	}
	if got := m.Reask(); len(got) != 0 {
		t.Errorf("Reask repeats %v", got)
	}
	if changed, _ := m.Resolve(context.Background()); changed || looked != 0 {
		t.Errorf("Resolve looked up %d names (changed %v) while the routing peers resolve", looked, changed)
	}
	// Off: the learned addresses go, the agent resolves itself again.
	m.SetPeerResolved(false)
	if _, _, ok := m.DomainPeer("db.corp.test"); ok {
		t.Error("DomainPeer answers with routing-peer resolution off")
	}
	if _, err := m.Resolve(context.Background()); err != nil || looked == 0 {
		t.Errorf("Resolve with routing-peer resolution off: looked %d, err %v", looked, err)
	}
}

// TestLearnCaps: names per route are capped.
func TestLearnCaps(t *testing.T) {
	a := testKey(t, 1)
	m := NewManager(Config{System: &fakeSystem{}})
	m.Update([]Route{{ID: "w", NetID: "corp", Domains: []string{"*.corp.test"}, Peer: a}})
	m.SetPeerResolved(true)
	learnMax(t, m)
	if m.Learn("one-too-many.corp.test", addrList("10.20.0.7")) {
		t.Fatal("a name past MaxDomainNames was learned")
	}
}

// TestLearnedExpire: names learned from routing peers expire LearnedHold
// after the last answer that named them (an answer refreshes them), so a
// wildcard's names do not pile up until MaxDomainNames refuses new ones,
// and failover re-asks only names still in use.
func TestLearnedExpire(t *testing.T) {
	a, b := testKey(t, 1), testKey(t, 2)
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	sys := &fakeSystem{}
	m := NewManager(Config{System: sys, Now: clk.now})
	m.Update([]Route{
		{ID: "w:a", NetID: "corp", Domains: []string{"*.corp.test"}, Peer: a, Metric: 10},
		{ID: "w:b", NetID: "corp", Domains: []string{"*.corp.test"}, Peer: b, Metric: 20},
	})
	m.SetPeerResolved(true)
	conns := map[key.Public]PeerConn{a: up, b: up}
	eval := evaluator(t, m, conns)
	eval()
	learnMax(t, m)
	clk.t = clk.t.Add(LearnedHold / 2)
	m.Learn("aa.corp.test", addrList("10.20.0.6")) // still in use: refreshed
	if m.Learn("new.corp.test", addrList("10.20.0.8")) {
		t.Fatal("a new name was learned past MaxDomainNames before any expired")
	}
	clk.t = clk.t.Add(LearnedHold/2 + time.Second)
	if !m.Learn("new.corp.test", addrList("10.20.0.8")) {
		t.Fatal("a new name is refused after the old ones expired")
	}
	plan := eval()
	if d := cmp.Diff(Plan{a: pfx("10.20.0.6/32", "10.20.0.8/32")}, plan, cmpNet); d != "" {
		t.Fatalf("plan after expiry (-want +got):\n%s", d)
	}
	// Failover re-asks only the names still held.
	delete(conns, a)
	clk.t = clk.t.Add(10 * time.Second)
	eval()
	clk.t = clk.t.Add(10 * time.Second)
	eval()
	if d := cmp.Diff([]string{"aa.corp.test", "new.corp.test"}, m.Reask()); d != "" {
		t.Errorf("names re-asked after failover (-want +got):\n%s", d)
	}
	clk.t = clk.t.Add(LearnedHold)
	if plan := eval(); len(plan) != 0 {
		t.Errorf("plan after every name expired: %v", plan)
	}
}
