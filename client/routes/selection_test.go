package routes

import (
	"errors"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// offer: networks "lan" and "dev" (plain), exit nodes "exit-a" (applied by
// management), "exit-b" and "exit-c" (SkipAutoApply).
func offer(t *testing.T) []Group {
	k := testKey(t, 9)
	rs := []Route{
		{ID: "1", NetID: "lan", Prefix: netip.MustParsePrefix("192.168.0.0/24"), Peer: k},
		{ID: "2", NetID: "dev", Prefix: netip.MustParsePrefix("10.2.0.0/16"), Peer: k},
		{ID: "3", NetID: "exit-a", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: k},
		{ID: "4", NetID: "exit-b", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: k, SkipAutoApply: true},
		{ID: "5", NetID: "exit-c", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: k, SkipAutoApply: true},
		{ID: "6", NetID: "exit-c-v6", Prefix: netip.MustParsePrefix("::/0"), Peer: k, SkipAutoApply: true}, // the pair's IPv6 half
	}
	return Groups(rs)
}

func activeNetIDs(s Selection, gs []Group) []string {
	a := s.Active(gs)
	var out []string
	for _, g := range gs {
		if a[g.ID] && !slices.Contains(out, g.NetID) {
			out = append(out, g.NetID)
		}
	}
	slices.Sort(out)
	return out
}

func TestSelection(t *testing.T) {
	gs := offer(t)
	known := map[string]bool{"lan": true, "dev": true, "exit-a": true, "exit-b": true, "exit-c": true}
	exits := map[string]bool{"exit-a": true, "exit-b": true, "exit-c": true}
	type op struct {
		sel, appendSel, all bool // sel false: deselect
		ids                 []string
		err                 error
	}
	for _, tc := range []struct {
		name string
		ops  []op
		want []string
	}{
		{"default: everything but exit nodes management leaves to the user", nil, []string{"dev", "exit-a", "lan"}},
		{"deselect one", []op{{ids: []string{"dev"}}}, []string{"exit-a", "lan"}},
		{"deselect all", []op{{all: true}}, nil},
		{"deselect all then append one", []op{{all: true}, {sel: true, appendSel: true, ids: []string{"lan"}}}, []string{"lan"}},
		{"replace the selection", []op{{sel: true, ids: []string{"dev"}}}, []string{"dev"}},
		{"select an exit node: the only one active", []op{{sel: true, appendSel: true, ids: []string{"exit-b"}}}, []string{"dev", "exit-b", "lan"}},
		{"select another exit node replaces it", []op{
			{sel: true, appendSel: true, ids: []string{"exit-b"}},
			{sel: true, appendSel: true, ids: []string{"exit-c"}},
		}, []string{"dev", "exit-c", "lan"}},
		{"deselect the user's exit node: management's auto exit node stays off", []op{
			{sel: true, appendSel: true, ids: []string{"exit-b"}},
			{ids: []string{"exit-b"}},
		}, []string{"dev", "lan"}},
		{"deselect the auto-applied exit node", []op{{ids: []string{"exit-a"}}}, []string{"dev", "lan"}},
		{"select all after deselecting", []op{{ids: []string{"dev", "exit-a"}}, {sel: true, all: true}}, []string{"dev", "exit-a", "lan"}},
		{"two exit nodes at once is an error and changes nothing", []op{
			{sel: true, appendSel: true, ids: []string{"exit-b", "exit-c"}, err: ErrTwoExitNodes},
		}, []string{"dev", "exit-a", "lan"}},
		{"an unknown network is an error and changes nothing", []op{
			{ids: []string{"dev", "nope"}, err: ErrUnknownNetwork},
			{sel: true, ids: []string{"nope"}, err: ErrUnknownNetwork},
		}, []string{"dev", "exit-a", "lan"}},
		{"an exit node offered for IPv4 and IPv6 is one choice", []op{{sel: true, ids: []string{"exit-c"}}}, []string{"exit-c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Selection
			for i, o := range tc.ops {
				var err error
				if o.sel {
					s, err = s.Select(o.ids, o.appendSel, o.all, known, exits)
				} else {
					s, err = s.Deselect(o.ids, o.all, known)
				}
				if !errors.Is(err, o.err) || (o.err == nil && err != nil) {
					t.Fatalf("op %d: err = %v, want %v", i, err, o.err)
				}
			}
			if d := cmp.Diff(tc.want, activeNetIDs(s, gs)); d != "" {
				t.Errorf("active networks (-want +got):\n%s", d)
			}
			// Both halves of exit-c go together.
			a := s.Active(gs)
			n := 0
			for _, g := range gs {
				if g.NetID == "exit-c" && a[g.ID] {
					n++
				}
			}
			if n == 1 {
				t.Errorf("only one half of exit-c is active")
			}
		})
	}
}

// TestSelectionPersists: a selection survives the daemon's round trip.
func TestSelectionPersists(t *testing.T) {
	gs := offer(t)
	known := map[string]bool{"lan": true, "dev": true, "exit-a": true, "exit-b": true, "exit-c": true}
	exits := map[string]bool{"exit-a": true, "exit-b": true, "exit-c": true}
	s, err := Selection{}.Select([]string{"exit-b"}, true, false, known, exits)
	if err != nil {
		t.Fatal(err)
	}
	s, err = s.Deselect([]string{"lan"}, false, known)
	if err != nil {
		t.Fatal(err)
	}
	saved := Selection{Selected: slices.Clone(s.Selected), Deselected: slices.Clone(s.Deselected), AllDeselected: s.AllDeselected}
	if d := cmp.Diff(activeNetIDs(s, gs), activeNetIDs(saved, gs)); d != "" {
		t.Errorf("restored selection differs (-before +after):\n%s", d)
	}
	if d := cmp.Diff([]string{"dev", "exit-b"}, activeNetIDs(saved, gs)); d != "" {
		t.Errorf("active (-want +got):\n%s", d)
	}
}
