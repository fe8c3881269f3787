package routes

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
)

// TestManagerIPv6ExitNodes: management mirrors an exit node's 0.0.0.0/0
// as ::/0 for peers on the IPv6 overlay, under NetID "<id>-v6" as
// NetBird v0.77.1 does (or under the same NetID). Either way the pair is
// one network to list, select and deselect: the IPv6 half follows its
// IPv4 partner to the same routing peer, a new exit node takes both, an
// IPv6-only exit node stands alone, and IPv6 networks inside the IPv6
// overlay are never routed.
func TestManagerIPv6ExitNodes(t *testing.T) {
	e, f := testKey(t, 1), testKey(t, 2)
	routes := func(v6NetID func(string) string) []Route {
		return []Route{
			{ID: "re", NetID: "exit-e", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: e},
			{ID: "re-v6-default", NetID: v6NetID("exit-e"), Prefix: netip.MustParsePrefix("::/0"), Peer: e},
			{ID: "rf", NetID: "exit-f", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: f, SkipAutoApply: true},
			{ID: "rf-v6-default", NetID: v6NetID("exit-f"), Prefix: netip.MustParsePrefix("::/0"), Peer: f, SkipAutoApply: true},
			{ID: "lan6", NetID: "lan6", Prefix: netip.MustParsePrefix("2001:db8:99::/64"), Peer: e},
			{ID: "in-overlay", NetID: "bad", Prefix: netip.MustParsePrefix("fd00:1234::/80"), Peer: e},
		}
	}
	type step struct {
		sel   bool // false: deselect
		ids   []string
		err   error
		plan  Plan
		exits []string // the networks ls exit nodes, "id=ranges selected"
	}
	both := pfx("0.0.0.0/0", "::/0")
	lan6 := pfx("2001:db8:99::/64")
	steps := []step{
		{plan: Plan{e: pfx("0.0.0.0/0", "::/0", "2001:db8:99::/64")}, exits: []string{"exit-e=0.0.0.0/0,::/0 true", "exit-f=0.0.0.0/0,::/0 false"}},
		{sel: true, ids: []string{"exit-f"}, plan: Plan{e: lan6, f: both}, exits: []string{"exit-e=0.0.0.0/0,::/0 false", "exit-f=0.0.0.0/0,::/0 true"}},
		{ids: []string{"exit-f"}, plan: Plan{e: lan6}, exits: []string{"exit-e=0.0.0.0/0,::/0 false", "exit-f=0.0.0.0/0,::/0 false"}},
		{sel: true, ids: []string{"exit-e", "exit-f"}, err: ErrTwoExitNodes, plan: Plan{e: lan6}},
		{sel: true, ids: []string{"exit-e"}, plan: Plan{e: pfx("0.0.0.0/0", "::/0", "2001:db8:99::/64")}},
	}
	for _, naming := range []struct {
		name string
		v6   func(string) string
	}{
		{"NetID-v6 as NetBird names it", func(id string) string { return id + "-v6" }},
		{"same NetID", func(id string) string { return id }},
	} {
		t.Run(naming.name, func(t *testing.T) {
			sys := &fakeSystem{}
			m := NewManager(Config{System: sys, Now: func() time.Time { return time.Unix(1_700_000_000, 0) }})
			m.SetOverlay(netip.MustParsePrefix("100.64.0.1/16"), netip.MustParsePrefix("fd00:1234::1/64"))
			m.Update(routes(naming.v6))
			conn := func(key.Public) (PeerConn, bool) { return up, true }
			for i, s := range steps {
				if s.ids != nil {
					var err error
					if s.sel {
						err = m.Select(s.ids, true, false)
					} else {
						err = m.Deselect(s.ids, false)
					}
					if !errors.Is(err, s.err) {
						t.Fatalf("step %d: err %v, want %v", i, err, s.err)
					}
				}
				plan, err := m.Evaluate(context.Background(), conn, nil)
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff(s.plan, plan, cmpNet); d != "" {
					t.Errorf("step %d: plan (-want +got):\n%s", i, d)
				}
				var installed []netip.Prefix
				for _, ps := range s.plan {
					installed = append(installed, ps...)
				}
				if d := cmp.Diff(sortedPrefixes(installed), sys.installed, cmpNet); d != "" {
					t.Errorf("step %d: installed (-want +got):\n%s", i, d)
				}
				if s.exits == nil {
					continue
				}
				var exits []string
				for _, n := range m.Networks() {
					if n.ExitNode {
						exits = append(exits, n.ID+"="+joinPrefixes(n.Prefixes)+" "+strconv.FormatBool(n.Selected))
					}
				}
				if d := cmp.Diff(s.exits, exits); d != "" {
					t.Errorf("step %d: exit nodes listed (-want +got):\n%s", i, d)
				}
			}
		})
	}
}

// TestManagerIPv6OnlyExitNode: a ::/0 route with no IPv4 partner (made
// by hand) is an exit node of its own, selected and deselected by its
// NetID, and stays within the one-exit-node rule.
func TestManagerIPv6OnlyExitNode(t *testing.T) {
	e, f := testKey(t, 1), testKey(t, 2)
	m := NewManager(Config{System: &fakeSystem{}})
	m.Update([]Route{
		{ID: "a", NetID: "exit-a", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: e, SkipAutoApply: true},
		{ID: "v6", NetID: "v6only-v6", Prefix: netip.MustParsePrefix("::/0"), Peer: f, SkipAutoApply: true},
	})
	conn := func(key.Public) (PeerConn, bool) { return up, true }
	if err := m.Select([]string{"v6only-v6"}, true, false); err != nil {
		t.Fatal(err)
	}
	plan, _ := m.Evaluate(context.Background(), conn, nil)
	if d := cmp.Diff(Plan{f: pfx("::/0")}, plan, cmpNet); d != "" {
		t.Errorf("IPv6-only exit node selected: plan (-want +got):\n%s", d)
	}
	if err := m.Select([]string{"exit-a"}, true, false); err != nil {
		t.Fatal(err)
	}
	plan, _ = m.Evaluate(context.Background(), conn, nil)
	if d := cmp.Diff(Plan{e: pfx("0.0.0.0/0")}, plan, cmpNet); d != "" {
		t.Errorf("another exit node selected: plan (-want +got):\n%s", d)
	}
}

// TestV6Guard: the IPv6 default is made unreachable exactly while an
// IPv4 default enters the tunnel without an IPv6 one.
func TestV6Guard(t *testing.T) {
	for _, tc := range []struct {
		want  []netip.Prefix
		guard []netip.Prefix
	}{
		{nil, nil},
		{pfx("10.0.0.0/8", "2001:db8::/32"), nil},
		{pfx("0.0.0.0/0"), pfx("::/0")},
		{pfx("0.0.0.0/0", "2001:db8::/32"), pfx("::/0")},
		{pfx("0.0.0.0/0", "::/0"), nil},
		{pfx("::/0"), nil},
		{pfx("0.0.0.0/1", "128.0.0.0/1"), nil}, // a split default is a network, not an exit node
	} {
		if d := cmp.Diff(tc.guard, v6Guard(tc.want), cmpNet); d != "" {
			t.Errorf("v6Guard(%v) (-want +got):\n%s", tc.want, d)
		}
	}
}

func sortedPrefixes(ps []netip.Prefix) []netip.Prefix {
	out := slices.Clone(ps)
	slices.SortFunc(out, comparePrefix)
	return out
}

func joinPrefixes(ps []netip.Prefix) string {
	var ss []string
	for _, p := range ps {
		ss = append(ss, p.String())
	}
	return strings.Join(ss, ",")
}
