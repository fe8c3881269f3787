package routes

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownNetwork is returned when a selection names a network the map
// does not offer.
var ErrUnknownNetwork = errors.New("no such network")

// ErrTwoExitNodes is returned when one selection names several exit nodes:
// only one can carry the default route.
var ErrTwoExitNodes = errors.New("only one exit node can be selected")

// Selection is the user's choice of networks, by NetID, as the daemon
// persists it. The zero value selects every network except exit nodes that
// management does not apply by itself (SkipAutoApply).
type Selection struct {
	Selected   []string
	Deselected []string
	// AllDeselected: nothing is used but what Selected names (set by
	// "deselect all" and by a select that replaces the selection).
	AllDeselected bool
}

func (s Selection) clone() Selection {
	return Selection{Selected: slices.Clone(s.Selected), Deselected: slices.Clone(s.Deselected), AllDeselected: s.AllDeselected}
}

// Active reports which groups are in use under the selection: every
// selected non-exit group, and at most one exit node. The exit node is the
// one the user selected (the first by NetID if an old selection holds
// several), else one management applies by itself (SkipAutoApply false,
// the first by NetID), else none: an exit node the map only offers stays
// off until the user picks it.
func (s Selection) Active(groups []Group) map[HAID]bool {
	sel := setOf(s.Selected)
	desel := setOf(s.Deselected)
	out := map[HAID]bool{}
	var userExit, autoExit []string
	for _, g := range groups {
		if !g.Exit() {
			if sel[g.NetID] || (!s.AllDeselected && !desel[g.NetID]) {
				out[g.ID] = true
			}
			continue
		}
		switch {
		case sel[g.NetID]:
			userExit = append(userExit, g.NetID)
		case s.AllDeselected || desel[g.NetID]:
		case slices.ContainsFunc(g.Routes, func(r Route) bool { return !r.SkipAutoApply }):
			autoExit = append(autoExit, g.NetID)
		}
	}
	exit := ""
	if len(userExit) > 0 {
		exit = slices.Min(userExit)
	} else if len(autoExit) > 0 {
		exit = slices.Min(autoExit)
	}
	if exit != "" {
		// An exit node offered for IPv4 and IPv6 under one NetID is one
		// choice: both groups go on.
		for _, g := range groups {
			if g.Exit() && g.NetID == exit {
				out[g.ID] = true
			}
		}
	}
	return out
}

// Select adds ids to the selection (appendSel) or makes them the whole
// selection; all selects everything (exit nodes as management applies
// them). exits names the NetIDs that are exit nodes and known every NetID
// the map offers: an unknown id or two exit nodes are an error and leave
// the selection as it was.
func (s Selection) Select(ids []string, appendSel, all bool, known, exits map[string]bool) (Selection, error) {
	if all {
		return Selection{}, nil
	}
	if err := check(ids, known); err != nil {
		return s, err
	}
	var picked []string
	for _, id := range ids {
		if exits[id] && !slices.Contains(picked, id) {
			picked = append(picked, id)
		}
	}
	if len(picked) > 1 {
		return s, fmt.Errorf("%w: %s", ErrTwoExitNodes, strings.Join(picked, ", "))
	}
	if !appendSel {
		return Selection{Selected: dedupe(ids), AllDeselected: true}, nil
	}
	n := s.clone()
	n.Selected = dedupe(append(n.Selected, ids...))
	n.Deselected = without(n.Deselected, setOf(ids))
	if len(picked) == 1 {
		// The new exit node replaces the one in use.
		others := map[string]bool{}
		for id := range exits {
			if id != picked[0] {
				others[id] = true
			}
		}
		n.Selected = without(n.Selected, others)
		if !n.AllDeselected {
			for id := range others {
				n.Deselected = append(n.Deselected, id)
			}
			n.Deselected = dedupe(n.Deselected)
		}
	}
	return n, nil
}

// Deselect removes ids from the selection; all deselects everything.
func (s Selection) Deselect(ids []string, all bool, known map[string]bool) (Selection, error) {
	if all {
		return Selection{AllDeselected: true}, nil
	}
	if err := check(ids, known); err != nil {
		return s, err
	}
	n := s.clone()
	n.Selected = without(n.Selected, setOf(ids))
	if !n.AllDeselected {
		n.Deselected = dedupe(append(n.Deselected, ids...))
	}
	return n, nil
}

func check(ids []string, known map[string]bool) error {
	if len(ids) == 0 {
		return fmt.Errorf("%w: name at least one network (or all)", ErrUnknownNetwork)
	}
	var bad []string
	for _, id := range ids {
		if !known[id] {
			bad = append(bad, id)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: %s", ErrUnknownNetwork, strings.Join(bad, ", "))
	}
	return nil
}

func setOf(ids []string) map[string]bool {
	m := make(map[string]bool, len(ids))
	for _, id := range ids {
		m[id] = true
	}
	return m
}

func dedupe(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return slices.Compact(out)
}

func without(ids []string, drop map[string]bool) []string {
	var out []string
	for _, id := range ids {
		if !drop[id] {
			out = append(out, id)
		}
	}
	return out
}
