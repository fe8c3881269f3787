package networkmap

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
)

// For random accounts and random peer-local changes (a peer joins some
// groups, leaves, is renamed, or its agent starts or stops using the IPv6
// overlay), every unchanged peer's old map with PeerLocal/Pair's
// differences applied equals its map computed afresh, v6 addresses and
// rules included; broader changes (a member moved between groups, a
// policy edited) are refused.
func TestPeerLocalDeltas(t *testing.T) {
	checked, whole := 0, 0 // peers whose deltas were checked; peers given whole maps
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		acc := account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 1,
			NetworkV6: netip.MustParsePrefix("fd00:70::/64")}
		acc.Settings.IPv6EnabledGroups = []account.GroupID{[]account.GroupID{"all", "g0"}[rng.IntN(2)]}
		n := 3 + rng.IntN(12)
		var peers []account.Peer
		for i := range n {
			p := account.Peer{ID: account.PeerID(fmt.Sprintf("p%02d", i)), IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(10 + i)}), Name: fmt.Sprint(i),
				IPv6: netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x70, 15: byte(10 + i)})}
			p.Meta.IPv6Overlay = rng.IntN(3) > 0
			peers = append(peers, p)
		}
		groups := []account.Group{{ID: "all", All: true}}
		for g := range 3 {
			grp := account.Group{ID: account.GroupID(fmt.Sprintf("g%d", g))}
			for _, p := range peers {
				if rng.IntN(2) == 0 {
					grp.Peers = append(grp.Peers, p.ID)
				}
			}
			groups = append(groups, grp)
		}
		var policies []account.Policy
		if rng.IntN(4) == 0 {
			policies = append(policies, defaults(acc.ID).Policies...)
		}
		for p := range 1 + rng.IntN(4) {
			gid := func() account.GroupID { return groups[rng.IntN(len(groups))].ID }
			r := account.Rule{ID: "r", Enabled: true, Action: []string{account.ActionAccept, account.ActionDrop}[rng.IntN(4)/3],
				Protocol: []string{account.ProtoAll, account.ProtoTCP, account.ProtoICMP}[rng.IntN(3)], Bidirectional: rng.IntN(2) == 0,
				Sources: []account.GroupID{gid()}, Destinations: []account.GroupID{gid()}}
			if r.Protocol == account.ProtoTCP {
				r.Ports = []uint16{uint16(20 + rng.IntN(3))}
			}
			policies = append(policies, account.Policy{ID: account.PolicyID(fmt.Sprintf("pol%d", p)), Enabled: true, Rules: []account.Rule{r}})
		}
		// Routes and network resources: a v4 exit node and a v6 prefix,
		// classic and as resources, served by random groups.
		groups = append(groups, account.Group{ID: "res"}, account.Group{ID: "res6"})
		gid := func() account.GroupID { return groups[rng.IntN(len(groups)-2)].ID }
		routes, resources, routers := randomRoutes(rng, gid)
		for _, res := range []account.GroupID{"res", "res6"} {
			policies = append(policies, account.Policy{ID: account.PolicyID("p" + res), Enabled: true, Rules: []account.Rule{{ID: "r" + string(res), Enabled: true,
				Action: account.ActionAccept, Protocol: account.ProtoAll, Sources: []account.GroupID{gid()}, Destinations: []account.GroupID{res}}}})
		}
		access := func(groups []account.Group, policies []account.Policy) Access {
			return Access{Groups: groups, Policies: policies, Routes: routes, Resources: resources, Routers: routers}
		}
		old := NewIndex(acc, peers, access(groups, policies))
		checkV6Free(t, seed, acc, peers, access(groups, policies))

		// One peer-local change.
		acc2 := acc
		acc2.Serial = 2
		peers2 := slices.Clone(peers)
		groups2 := make([]account.Group, len(groups))
		for i, g := range groups {
			groups2[i] = g
			groups2[i].Peers = slices.Clone(g.Peers)
		}
		var changedID account.PeerID
		switch rng.IntN(5) {
		case 0: // a new peer joins some groups
			np := account.Peer{ID: "new", IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(5)}), Name: "new",
				IPv6: netip.MustParseAddr("fd00:70::5")}
			np.Meta.IPv6Overlay = rng.IntN(2) == 0
			peers2 = append(peers2, np)
			for i := 1; i < len(groups2); i++ {
				if rng.IntN(2) == 0 {
					groups2[i].Peers = append(groups2[i].Peers, np.ID)
				}
			}
			changedID = np.ID
		case 1: // a peer leaves (and its groups)
			k := rng.IntN(len(peers2))
			changedID = peers2[k].ID
			peers2 = slices.Delete(peers2, k, k+1)
			for i := range groups2 {
				groups2[i].Peers = slices.DeleteFunc(groups2[i].Peers, func(id account.PeerID) bool { return id == changedID })
			}
		case 2: // a peer is renamed
			k := rng.IntN(len(peers2))
			peers2[k].Name = "renamed"
			changedID = peers2[k].ID
		case 3: // an agent starts or stops reporting the overlay
			k := rng.IntN(len(peers2))
			peers2[k].Meta.IPv6Overlay = !peers2[k].Meta.IPv6Overlay
			changedID = peers2[k].ID
		case 4: // its owner runs it with --disable-ipv6, or no longer
			k := rng.IntN(len(peers2))
			peers2[k].Meta.IPv6Overlay = true
			peers2[k].Meta.Flags.DisableIPv6 = !peers[k].Meta.Flags.DisableIPv6 && peers[k].Meta.IPv6Overlay
			changedID = peers2[k].ID
		}
		ix := NewIndex(acc2, peers2, access(groups2, policies))
		changes, ok := PeerLocal(old, ix)
		if ok && len(changes) == 0 && old.records[changedID] == ix.records[changedID] {
			continue // an overlay switch of a peer in no enabled group: nothing shows it
		}
		if !ok || len(changes) != 1 || changes[0].ID != changedID {
			t.Fatalf("seed %d: PeerLocal = %v %v, want the one change %s", seed, changes, ok, changedID)
		}
		for _, self := range peers2 {
			if self.ID == changedID {
				continue
			}
			before, _ := old.Compute(self.ID)
			want, _ := ix.Compute(self.ID)
			if !SameRoutes(old, ix, self.ID) {
				whole++
				continue // a whole map goes (grpcapi's mapDelta)
			}
			checked++
			if !reflect.DeepEqual(before.Routes, want.Routes) || !reflect.DeepEqual(before.RouteRules, want.RouteRules) {
				t.Fatalf("seed %d, peer %s: routes changed, yet SameRoutes:\n%v %v\n%v %v", seed, self.ID, before.Routes, before.RouteRules, want.Routes, want.RouteRules)
			}
			got := applyPair(before, old, ix, self.ID, changes)
			if !sameMap(got, want) {
				t.Fatalf("seed %d, peer %s: delta gives\n%v\nwant\n%v", seed, self.ID, describe(got), describe(want))
			}
		}

		// Broader changes: a member moved between groups, a policy turned
		// off. PeerLocal must refuse them unless the deltas it implies still
		// give every map right (a change no rule sees).
		g3 := make([]account.Group, len(groups))
		for i, g := range groups {
			g3[i] = g
			g3[i].Peers = slices.Clone(g.Peers)
		}
		moved := peers[0].ID
		if slices.Contains(g3[1].Peers, moved) {
			g3[1].Peers = slices.DeleteFunc(g3[1].Peers, func(id account.PeerID) bool { return id == moved })
		} else {
			g3[1].Peers = append(g3[1].Peers, moved)
		}
		p2 := slices.Clone(policies)
		p2[0].Enabled = false
		for _, broader := range []*Index{NewIndex(acc2, peers, access(g3, policies)), NewIndex(acc2, peers, access(groups, p2))} {
			changes, ok := PeerLocal(old, broader)
			if !ok {
				continue
			}
			for _, self := range peers {
				if slices.ContainsFunc(changes, func(c Change) bool { return c.ID == self.ID }) {
					continue // a changed peer gets its whole map (mapDelta)
				}
				before, _ := old.Compute(self.ID)
				want, _ := broader.Compute(self.ID)
				if !SameRoutes(old, broader, self.ID) {
					continue
				}
				if got := applyPair(before, old, broader, self.ID, changes); !sameMap(got, want) {
					t.Fatalf("seed %d: a broader change passed as peer-local (%v) and gives peer %s a wrong map:\n%v\nwant\n%v", seed, changes, self.ID, describe(got), describe(want))
				}
			}
		}
	}
	t.Logf("%d peers' deltas checked, %d given whole maps", checked, whole)
	if checked < 500 || whole == 0 {
		t.Fatalf("%d deltas checked, %d whole maps: the test checks too little", checked, whole)
	}
}

// applyPair is what a client holding before ends up with after the delta.
func applyPair(before Map, old, ix *Index, self account.PeerID, changes []Change) Map {
	peers := map[account.PeerID]bool{}
	for _, p := range before.Peers {
		peers[p.ID] = true
	}
	rules := slices.Clone(before.Rules)
	for _, c := range changes {
		oldVis, oldRules := old.Pair(self, c.ID)
		newVis, newRules := ix.Pair(self, c.ID)
		if oldVis {
			delete(peers, c.ID)
		}
		if newVis {
			peers[c.ID] = true
		}
		for _, r := range oldRules {
			i := slices.IndexFunc(rules, func(x FirewallRule) bool { return fmt.Sprint(x) == fmt.Sprint(r) })
			if i >= 0 {
				rules = slices.Delete(rules, i, i+1)
			}
		}
		rules = append(rules, newRules...)
	}
	// The v6 addresses shown: as before, except for the changed peers,
	// which a delta sends again.
	v6 := map[account.PeerID]bool{}
	for _, p := range before.Peers {
		v6[p.ID] = before.ShowsV6(p)
	}
	for _, c := range changes {
		v6[c.ID] = ix.IsV6(self) && ix.IsV6(c.ID)
	}
	out := before
	out.Peers, out.V6 = nil, v6
	for _, p := range ix.peers {
		if peers[p.ID] {
			out.Peers = append(out.Peers, ix.peer(p.ID))
		}
	}
	out.Rules = rules
	return out
}

func describe(m Map) string {
	var ids []account.PeerID
	for _, p := range m.Peers {
		ids = append(ids, p.ID)
	}
	return fmt.Sprint(ids, m.Rules)
}

func sameMap(a, b Map) bool {
	if len(a.Peers) != len(b.Peers) || len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Peers {
		if a.Peers[i].ID != b.Peers[i].ID || a.Peers[i].Name != b.Peers[i].Name || a.ShowsV6(a.Peers[i]) != b.ShowsV6(b.Peers[i]) {
			return false
		}
	}
	ra, rb := make([]string, len(a.Rules)), make([]string, len(b.Rules))
	for i := range a.Rules {
		ra[i], rb[i] = fmt.Sprint(a.Rules[i]), fmt.Sprint(b.Rules[i])
	}
	slices.Sort(ra)
	slices.Sort(rb)
	return slices.Equal(ra, rb)
}

// randomRoutes: a v4 exit node and a v6 prefix, each as a classic route
// (served by a random group, for another) and as a network resource (in
// group res and res6, of networks n and n6; routers a random group each).
func randomRoutes(rng *rand.Rand, gid func() account.GroupID) ([]account.Route, []account.NetworkResource, []account.NetworkRouter) {
	g := func() []account.GroupID { return []account.GroupID{gid()} }
	routes := []account.Route{
		{ID: "ex", NetID: "exit", Enabled: true, PeerGroups: g(), Network: netip.MustParsePrefix("0.0.0.0/0"), Groups: g()},
		{ID: "l6", NetID: "lan6", Enabled: true, PeerGroups: g(), Network: netip.MustParsePrefix("fd99::/64"), Groups: g()},
	}
	if rng.IntN(2) == 0 {
		routes[1].AccessControlGroups = []account.GroupID{"res"}
	}
	resources := []account.NetworkResource{
		{ID: "inet", NetworkID: "n", Name: "inet", Type: account.ResourceSubnet, Prefix: netip.MustParsePrefix("0.0.0.0/0"), Groups: []account.GroupID{"res"}, Enabled: true},
		{ID: "db6", NetworkID: "n6", Name: "db6", Type: account.ResourceHost, Prefix: netip.MustParsePrefix("fd99::5/128"), Groups: []account.GroupID{"res6"}, Enabled: true},
	}
	routers := []account.NetworkRouter{{ID: "nr", NetworkID: "n", PeerGroups: g(), Enabled: true}, {ID: "nr6", NetworkID: "n6", PeerGroups: g(), Enabled: true}}
	return routes, resources, routers
}

// withoutV6Routes is access without its v6 routes and resources.
func withoutV6Routes(a Access) Access {
	a.Routes = slices.DeleteFunc(slices.Clone(a.Routes), func(r account.Route) bool { return isV6(r.Network) })
	a.Resources = slices.DeleteFunc(slices.Clone(a.Resources), func(r account.NetworkResource) bool { return isV6(r.Prefix) })
	return a
}

// checkV6Free: every peer that is not v6-active gets the map of the same
// state without the overlay and without the v6 routes and resources.
func checkV6Free(t *testing.T, seed uint64, acc account.Account, peers []account.Peer, access Access) {
	t.Helper()
	ix := NewIndex(acc, peers, access)
	acc0, peers0 := withoutV6(acc, peers)
	ix0 := NewIndex(acc0, peers0, withoutV6Routes(access))
	for _, p := range peers {
		if ix.IsV6(p.ID) {
			continue
		}
		got, _ := ix.Compute(p.ID)
		want, _ := ix0.Compute(p.ID)
		if got.SelfV6 || !reflect.DeepEqual(peerIDs(got), peerIDs(want)) || !reflect.DeepEqual(got.Rules, want.Rules) ||
			!reflect.DeepEqual(got.Routes, want.Routes) || !reflect.DeepEqual(got.RouteRules, want.RouteRules) || got.AllowAll != want.AllowAll {
			t.Fatalf("seed %d, %s (not v6-active): map differs from the one without the overlay:\n%v %v %v\n%v %v %v", seed, p.ID,
				describe(got), got.Routes, got.RouteRules, describe(want), want.Routes, want.RouteRules)
		}
	}
}
