package networkmap

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
)

// TestReachable: on random accounts (groups, accept and drop rules, one-way
// and both ways, single-peer rules, pending and temporary peers, with and
// without the allow-all default), every peer's Reachable is its map's
// Peers, and those are in IP order, unique, without itself or a pending peer.
func TestReachable(t *testing.T) {
	for seed := range uint64(40) {
		r := rand.New(rand.NewPCG(seed, 1))
		acc := account.Account{ID: "a", Domain: "example.test", Network: netip.MustParsePrefix("100.70.0.0/16")}
		n := 5 + r.IntN(60)
		peers := make([]account.Peer, n)
		for i := range peers {
			peers[i] = account.Peer{ID: account.PeerID(fmt.Sprintf("p%d", i)), IP: netip.AddrFrom4([4]byte{100, 70, byte(i / 250), byte(1 + i%250)}),
				DNSLabel: fmt.Sprintf("p%d", i), ApprovalRequired: r.IntN(8) == 0, Temporary: r.IntN(10) == 0}
		}
		r.Shuffle(n, func(i, j int) { peers[i], peers[j] = peers[j], peers[i] })
		access := Access{Groups: []account.Group{{ID: "all", Name: "All", All: true}}}
		groups := 1 + r.IntN(6)
		for g := range groups {
			grp := account.Group{ID: account.GroupID(fmt.Sprintf("g%d", g)), Name: fmt.Sprintf("g%d", g)}
			for _, p := range peers {
				if r.IntN(3) == 0 {
					grp.Peers = append(grp.Peers, p.ID)
				}
			}
			access.Groups = append(access.Groups, grp)
		}
		if seed%2 == 0 {
			access.Policies = defaults(acc.ID).Policies
		}
		for j := range r.IntN(8) {
			rule := account.Rule{ID: fmt.Sprintf("r%d", j), Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoTCP, Ports: []uint16{22},
				Bidirectional: r.IntN(2) == 0, Sources: []account.GroupID{access.Groups[r.IntN(len(access.Groups))].ID},
				Destinations: []account.GroupID{access.Groups[r.IntN(len(access.Groups))].ID}}
			if r.IntN(5) == 0 {
				rule.Action = account.ActionDrop
			}
			if r.IntN(5) == 0 {
				rule.Sources, rule.SourcePeer = nil, peers[r.IntN(n)].ID
			}
			access.Policies = append(access.Policies, account.Policy{ID: account.PolicyID(fmt.Sprintf("pol%d", j)), Enabled: true, Rules: []account.Rule{rule}})
		}
		ix := NewIndex(acc, peers, access)
		for _, p := range peers {
			m, ok := ix.Compute(p.ID)
			got, ok2 := ix.Reachable(p.ID)
			if !ok || !ok2 {
				t.Fatalf("seed %d %s: not found", seed, p.ID)
			}
			if !slices.Equal(got, m.Peers) {
				t.Fatalf("seed %d %s: Reachable %v, map peers %v", seed, p.ID, ids(got), ids(m.Peers))
			}
			for i, q := range m.Peers {
				if q.ID == p.ID || q.ApprovalRequired || (i > 0 && !m.Peers[i-1].IP.Less(q.IP)) {
					t.Fatalf("seed %d %s: map peers %v (self, pending or out of IP order)", seed, p.ID, ids(m.Peers))
				}
			}
		}
		if _, ok := ix.Reachable("gone"); ok {
			t.Fatal("an unknown peer is reachable")
		}
	}
}

func ids(ps []*account.Peer) []account.PeerID {
	var out []account.PeerID
	for _, p := range ps {
		out = append(out, p.ID)
	}
	return out
}
