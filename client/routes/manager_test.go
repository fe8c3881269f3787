package routes

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/wiremesh/wiremesh/internal/key"
)

// cmpNet compares netip values by value.
var cmpNet = cmpopts.EquateComparable(netip.Prefix{}, netip.Addr{})

// fakeSystem records what is installed, like a routing table would.
type fakeSystem struct {
	applies   int
	installed []netip.Prefix
	keep      []netip.Addr
	closed    bool
}

func (f *fakeSystem) Apply(_ context.Context, want []netip.Prefix, keep []netip.Addr) error {
	f.applies++
	f.installed, f.keep = slices.Clone(want), keep
	return nil
}

func (f *fakeSystem) Close(context.Context) error { f.installed, f.closed = nil, true; return nil }

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func pfx(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// TestManagerFailover: two routing peers for one network; the network's
// prefixes go to the chosen one, move to the other within five seconds of
// its connection breaking, and leave the system on Close.
func TestManagerFailover(t *testing.T) {
	a, b := testKey(t, 1), testKey(t, 2)
	sys := &fakeSystem{}
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := NewManager(Config{System: sys, Now: clk.now})
	m.Update([]Route{
		{ID: "r:a", NetID: "office", Prefix: netip.MustParsePrefix("10.1.0.0/16"), Peer: a, Metric: 10},
		{ID: "r:b", NetID: "office", Prefix: netip.MustParsePrefix("10.1.0.0/16"), Peer: b, Metric: 20},
		{ID: "s", NetID: "dc", Prefix: netip.MustParsePrefix("10.9.0.0/16"), Peer: b, Metric: 10},
	})
	conns := map[key.Public]PeerConn{a: up, b: up}
	conn := func(k key.Public) (PeerConn, bool) { c, ok := conns[k]; return c, ok }
	keep := []netip.Addr{netip.MustParseAddr("198.51.100.10")}
	eval := func() Plan {
		t.Helper()
		p, err := m.Evaluate(context.Background(), conn, keep)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	if d := cmp.Diff(Plan{a: pfx("10.1.0.0/16"), b: pfx("10.9.0.0/16")}, eval(), cmpNet); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
	if d := cmp.Diff(pfx("10.1.0.0/16", "10.9.0.0/16"), sys.installed, cmpNet); d != "" {
		t.Errorf("installed (-want +got):\n%s", d)
	}
	if d := cmp.Diff(keep, sys.keep, cmpNet); d != "" {
		t.Errorf("keep not passed to the system: %s", d)
	}
	eval() // nothing changed: the system is left alone
	if sys.applies != 1 {
		t.Errorf("system applied %d times for one change", sys.applies)
	}
	// a breaks: for the grace nothing moves, then b carries both.
	conns[a] = down
	var moved time.Duration
	for step := time.Duration(0); step <= 5*time.Second; step += time.Second {
		clk.t = clk.t.Add(time.Second)
		if p := eval(); len(p[b]) == 2 {
			moved = step + time.Second
			break
		}
	}
	if moved == 0 || moved > 5*time.Second {
		t.Fatalf("no failover within 5 s (moved after %v)", moved)
	}
	if d := cmp.Diff(Plan{b: pfx("10.1.0.0/16", "10.9.0.0/16")}, eval(), cmpNet); d != "" {
		t.Errorf("plan after failover (-want +got):\n%s", d)
	}
	// a comes back: the route stays with b.
	conns[a] = up
	clk.t = clk.t.Add(time.Minute)
	if p := eval(); len(p[a]) != 0 {
		t.Errorf("route moved back to the recovered peer: %v", p)
	}
	nets := m.Networks()
	if len(nets) != 2 || nets[1].ID != "office" || len(nets[1].Chosen) != 1 || nets[1].Chosen[0] != b || len(nets[1].Peers) != 2 {
		t.Errorf("networks = %+v", nets)
	}
	// Deselect office: its prefix leaves the plan and the system.
	if err := m.Deselect([]string{"office"}, false); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Plan{b: pfx("10.9.0.0/16")}, eval(), cmpNet); d != "" {
		t.Errorf("plan after deselect (-want +got):\n%s", d)
	}
	if err := m.Deselect([]string{"nope"}, false); !errors.Is(err, ErrUnknownNetwork) {
		t.Errorf("deselect unknown: %v", err)
	}
	if err := m.Close(context.Background()); err != nil || !sys.closed {
		t.Fatalf("close: %v, closed %v", err, sys.closed)
	}
	if p := eval(); len(p) != 0 || len(sys.installed) != 0 {
		t.Errorf("installed after Close: %v %v", p, sys.installed)
	}
}

// TestManagerDomains: a domain route installs what its names resolve to;
// with keepRoute, addresses that stop resolving stay; without, they go.
func TestManagerDomains(t *testing.T) {
	peer := testKey(t, 1)
	answers := map[string][]netip.Addr{
		"a.example": {netip.MustParseAddr("203.0.113.1")},
		"b.example": {netip.MustParseAddr("203.0.113.2"), netip.MustParseAddr("2001:db8::2")},
	}
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		if a, ok := answers[host]; ok {
			return slices.Clone(a), nil
		}
		return nil, errors.New("no such host")
	}
	for _, keepRoute := range []bool{false, true} {
		sys := &fakeSystem{}
		m := NewManager(Config{System: sys, Lookup: lookup})
		m.Update([]Route{{ID: "d", NetID: "web", Domains: []string{"a.example", "b.example", "*.wild.example"}, Peer: peer, KeepRoute: keepRoute}})
		conn := func(key.Public) (PeerConn, bool) { return up, true }
		changed, err := m.Resolve(context.Background())
		if err != nil || !changed {
			t.Fatalf("resolve: changed %v, err %v", changed, err)
		}
		if _, err := m.Evaluate(context.Background(), conn, nil); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(pfx("203.0.113.1/32", "203.0.113.2/32", "2001:db8::2/128"), sys.installed, cmpNet); d != "" {
			t.Errorf("installed (-want +got):\n%s", d)
		}
		answers["a.example"] = []netip.Addr{netip.MustParseAddr("203.0.113.9")}
		if _, err := m.Resolve(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := m.Evaluate(context.Background(), conn, nil); err != nil {
			t.Fatal(err)
		}
		want := pfx("203.0.113.2/32", "203.0.113.9/32", "2001:db8::2/128")
		if keepRoute {
			want = pfx("203.0.113.1/32", "203.0.113.2/32", "203.0.113.9/32", "2001:db8::2/128")
		}
		if d := cmp.Diff(want, sys.installed, cmpNet); d != "" {
			t.Errorf("keepRoute %v: installed after a change (-want +got):\n%s", keepRoute, d)
		}
		nets := m.Networks()
		if len(nets) != 1 || len(nets[0].ResolvedIPs["b.example"]) != 2 {
			t.Errorf("networks = %+v", nets)
		}
		answers["a.example"] = []netip.Addr{netip.MustParseAddr("203.0.113.1")}
	}
}
