package networkmap

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
)

// TestPendingApproval: a peer pending approval sees nobody and nobody sees
// it, under an all-to-all policy, group rules and single-peer rules alike;
// once approved it is back in every map, and the change is peer-local (a
// delta applied to the others' maps gives their new maps).
func TestPendingApproval(t *testing.T) {
	acc := account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 3}
	ip := func(n byte) netip.Addr { return netip.AddrFrom4([4]byte{100, 70, 0, n}) }
	groupRule := account.Rule{ID: "g", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll, Bidirectional: true,
		Sources: []account.GroupID{"A"}, Destinations: []account.GroupID{"A"}}
	peerRule := account.Rule{ID: "p", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoTCP, Ports: []uint16{22},
		SourcePeer: "new", DestinationPeer: "old1"}
	groups := []account.Group{{ID: "all", All: true}, {ID: "A", Peers: []account.PeerID{"old1", "old2", "new"}}}
	tests := []struct {
		name   string
		access Access
		// What old1 sees while new is pending, and once it is approved.
		wantBefore, wantAfter []account.PeerID
	}{
		{"all to all", defaults(acc.ID), []account.PeerID{"old2"}, []account.PeerID{"old2", "new"}},
		{"group rule", Access{Groups: groups, Policies: []account.Policy{{ID: "pg", Enabled: true, Rules: []account.Rule{groupRule}}}},
			[]account.PeerID{"old2"}, []account.PeerID{"old2", "new"}},
		{"peer rule", Access{Groups: groups, Policies: []account.Policy{{ID: "pp", Enabled: true, Rules: []account.Rule{peerRule}}}},
			nil, []account.PeerID{"new"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			peers := []account.Peer{{ID: "old1", IP: ip(1)}, {ID: "old2", IP: ip(2)}, {ID: "new", IP: ip(3), ApprovalRequired: true}}
			pending := NewIndex(acc, peers, tc.access)
			m, ok := pending.Compute("new")
			if !ok {
				t.Fatal("the pending peer has no map")
			}
			if got := peerIDs(m); len(got) != 0 || len(m.Rules) != 0 || m.AllowAll {
				t.Fatalf("pending peer's map: peers %v, rules %+v, allow all %v; want none", got, m.Rules, m.AllowAll)
			}
			if m.Address() != "100.70.0.3/16" || !m.Self.ApprovalRequired {
				t.Fatalf("pending peer's own config: %s, pending %v", m.Address(), m.Self.ApprovalRequired)
			}
			for _, id := range []account.PeerID{"old1", "old2"} {
				om, _ := pending.Compute(id)
				for _, p := range om.Peers {
					if p.ID == "new" {
						t.Fatalf("%s's map lists the pending peer", id)
					}
				}
				for _, r := range om.Rules {
					if r.Peer == ip(3) {
						t.Fatalf("%s's map has a rule about the pending peer: %+v", id, r)
					}
				}
				if vis, rules := pending.Pair(id, "new"); vis || len(rules) != 0 {
					t.Fatalf("Pair(%s, new) = %v %v, want invisible", id, vis, rules)
				}
			}

			approved := append([]account.Peer(nil), peers...)
			approved[2].ApprovalRequired = false
			acc2 := acc
			acc2.Serial++
			after := NewIndex(acc2, approved, tc.access)
			nm, _ := after.Compute("new")
			if len(nm.Peers) == 0 {
				t.Fatal("the approved peer still sees nobody")
			}
			s0, _ := pending.Signature("new")
			s1, _ := after.Signature("new")
			if s0 == s1 {
				t.Fatal("approval left the peer's own signature as it was")
			}
			changes, ok := PeerLocal(pending, after)
			if !ok {
				t.Fatal("approval is not a peer-local change")
			}
			for _, id := range []account.PeerID{"old1", "old2"} {
				before, _ := pending.Compute(id)
				want, _ := after.Compute(id)
				got := applyPair(before, pending, after, id, changes)
				if !sameMap(got, want) {
					t.Fatalf("%s: delta gives %s, want %s", id, describe(got), describe(want))
				}
			}
			before, _ := pending.Compute("old1")
			if diff := cmp.Diff(tc.wantBefore, peerIDs(before)); diff != "" {
				t.Errorf("old1 while new is pending (-want +got):\n%s", diff)
			}
			old1, _ := after.Compute("old1")
			if diff := cmp.Diff(tc.wantAfter, peerIDs(old1)); diff != "" {
				t.Errorf("old1 once new is approved (-want +got):\n%s", diff)
			}
		})
	}
}
