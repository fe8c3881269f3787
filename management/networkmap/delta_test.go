package networkmap

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
)

// For random accounts and random peer-local changes (a peer joins some
// groups, leaves, or is renamed), every unchanged peer's old map with
// PeerLocal/Pair's differences applied equals its map computed afresh;
// broader changes (a member moved between groups, a policy edited) are
// refused.
func TestPeerLocalDeltas(t *testing.T) {
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 7))
		acc := account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 1}
		n := 3 + rng.IntN(12)
		var peers []account.Peer
		for i := range n {
			peers = append(peers, account.Peer{ID: account.PeerID(fmt.Sprintf("p%02d", i)), IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(10 + i)}), Name: fmt.Sprint(i)})
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
		old := NewIndex(acc, peers, Access{Groups: groups, Policies: policies})

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
		switch rng.IntN(3) {
		case 0: // a new peer joins some groups
			np := account.Peer{ID: "new", IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(5)}), Name: "new"}
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
		}
		ix := NewIndex(acc2, peers2, Access{Groups: groups2, Policies: policies})
		changes, ok := PeerLocal(old, ix)
		if !ok || len(changes) != 1 || changes[0].ID != changedID {
			t.Fatalf("seed %d: PeerLocal = %v %v, want the one change %s", seed, changes, ok, changedID)
		}
		for _, self := range peers2 {
			if self.ID == changedID {
				continue
			}
			before, _ := old.Compute(self.ID)
			want, _ := ix.Compute(self.ID)
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
		for _, broader := range []*Index{NewIndex(acc2, peers, Access{Groups: g3, Policies: policies}), NewIndex(acc2, peers, Access{Groups: groups, Policies: p2})} {
			changes, ok := PeerLocal(old, broader)
			if !ok {
				continue
			}
			for _, self := range peers {
				before, _ := old.Compute(self.ID)
				want, _ := broader.Compute(self.ID)
				if got := applyPair(before, old, broader, self.ID, changes); !sameMap(got, want) {
					t.Fatalf("seed %d: a broader change passed as peer-local and gives peer %s a wrong map", seed, self.ID)
				}
			}
		}
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
	out := before
	out.Peers = nil
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
		if a.Peers[i].ID != b.Peers[i].ID || a.Peers[i].Name != b.Peers[i].Name {
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
