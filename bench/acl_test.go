package bench

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
)

// TestBenchPolicies measures network-map computation for an account of
// 10,000 peers in 100 groups with 1,000 policies, and what one group
// change costs: the account state is prepared once (networkmap.Index) and
// every peer's map recomputed from it; the streams then send only the
// maps that changed, whose number is reported beside the time.
func TestBenchPolicies(t *testing.T) {
	requireBench(t)
	const peersN, groupsN, policiesN = 10000, 100, 1000
	rng := rand.New(rand.NewPCG(1, 2))
	acc := account.Account{ID: "bench", Network: netip.MustParsePrefix("100.64.0.0/16")}
	peers := make([]account.Peer, peersN)
	for i := range peers {
		peers[i] = account.Peer{ID: account.PeerID(fmt.Sprintf("p%d", i)), AccountID: acc.ID,
			IP: netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)})}
	}
	groups := []account.Group{{ID: "all", All: true, Name: "All"}}
	for g := range groupsN {
		grp := account.Group{ID: account.GroupID(fmt.Sprintf("g%d", g)), Name: fmt.Sprintf("g%d", g)}
		for i := g; i < peersN; i += groupsN {
			grp.Peers = append(grp.Peers, peers[i].ID)
		}
		groups = append(groups, grp)
	}
	var policies []account.Policy
	for p := range policiesN {
		src, dst := groups[1+rng.IntN(groupsN)].ID, groups[1+rng.IntN(groupsN)].ID
		policies = append(policies, account.Policy{ID: account.PolicyID(fmt.Sprintf("pol%d", p)), Enabled: true,
			Rules: []account.Rule{{ID: "r", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoTCP,
				Ports: []uint16{uint16(1000 + p)}, Sources: []account.GroupID{src}, Destinations: []account.GroupID{dst}}}})
	}
	access := networkmap.Access{Groups: groups, Policies: policies}

	// Each map is reduced to a hash right away: 10,000 maps of ~2,000
	// rules each do not fit in memory side by side.
	hash := func(m networkmap.Map) uint64 {
		h := fnv.New64a()
		for _, p := range m.Peers {
			h.Write([]byte(p.ID))
		}
		for _, r := range m.Rules {
			fmt.Fprint(h, r.Peer, r.Direction, r.Action, r.Protocol, r.Ports, r.Ranges)
		}
		return h.Sum64()
	}
	computeAll := func(a networkmap.Access) ([]uint64, int, time.Duration, time.Duration) {
		t0 := time.Now()
		ix := networkmap.NewIndex(acc, peers, a)
		prep := time.Since(t0)
		out := make([]uint64, peersN)
		rules := 0
		var compute time.Duration
		for i, p := range peers {
			c0 := time.Now()
			m, _ := ix.Compute(p.ID)
			compute += time.Since(c0)
			rules += len(m.Rules)
			out[i] = hash(m)
		}
		return out, rules, prep, prep + compute
	}
	before, rules, prep, total := computeAll(access)
	report := []string{fmt.Sprintf("policies: %d peers, %d groups, %d policies: index %v, all %d maps %v (%.0f µs per map, %d rules per map on average)",
		peersN, groupsN, policiesN, prep.Round(time.Millisecond), peersN, total.Round(time.Millisecond),
		float64(total.Microseconds())/peersN, rules/peersN)}

	// One group change: a peer joins group g7.
	changed := access
	changed.Groups = append([]account.Group(nil), access.Groups...)
	g := changed.Groups[8]
	g.Peers = append(append([]account.PeerID(nil), g.Peers...), peers[1].ID)
	changed.Groups[8] = g
	// What management does after the change: build the new index, compare
	// each peer's signature with the one its stream had, and compute (and
	// send) only the maps whose inputs changed.
	oldIx := networkmap.NewIndex(acc, peers, access)
	oldSigs := make([]networkmap.Sig, peersN)
	for i, p := range peers {
		oldSigs[i], _ = oldIx.Signature(p.ID)
	}
	t0 := time.Now()
	newIx := networkmap.NewIndex(acc, peers, changed)
	recomputed := 0
	for i, p := range peers {
		sig, _ := newIx.Signature(p.ID)
		if sig == oldSigs[i] {
			continue
		}
		recomputed++
		newIx.Compute(p.ID)
	}
	incremental := time.Since(t0)
	after, _, _, _ := computeAll(changed)
	affected := 0
	for i := range after {
		if before[i] != after[i] {
			affected++
		}
	}
	report = append(report, fmt.Sprintf("policies: one group change: %d maps differ; signatures picked %d to recompute, done in %v (all %d maps: %v)",
		affected, recomputed, incremental.Round(time.Millisecond), peersN, total.Round(time.Millisecond)))
	report = append(report, fmt.Sprintf("RATIO work after one group change / full recomputation: %.3f (maps recomputed %d of %d; the goal: proportional to the affected peers)",
		incremental.Seconds()/total.Seconds(), recomputed, peersN))
	if recomputed < affected {
		t.Fatalf("signatures missed changed maps: %d recomputed, %d changed", recomputed, affected)
	}
	for _, l := range report {
		t.Log(l)
	}
	appendReport(t, report)
}
