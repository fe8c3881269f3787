package networkmap

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
)

// TestTemporaryPeer: a temporary peer is in no group, not even All, so
// under the default all-to-all policy it sees only what its own rules
// give (the target) and only the target sees it. The target's map is
// spelled out per peer instead of allow-all, so the temporary peer gets
// only its ports; other maps stay compact. A rename of the temporary
// peer is peer-local, and Pair agrees with Compute for every pair.
func TestTemporaryPeer(t *testing.T) {
	acc := account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 3}
	ip := func(n byte) netip.Addr { return netip.AddrFrom4([4]byte{100, 70, 0, n}) }
	access := defaults(acc.ID)
	access.Policies = append(access.Policies, account.Policy{ID: "tmp", Enabled: true, Rules: []account.Rule{{ID: "t", Enabled: true,
		Action: account.ActionAccept, Protocol: account.ProtoTCP, Ports: []uint16{22}, SourcePeer: "temp", DestinationPeer: "target"}}})
	peers := []account.Peer{{ID: "target", IP: ip(1)}, {ID: "other", IP: ip(2)}, {ID: "third", IP: ip(3)}, {ID: "temp", IP: ip(4), Temporary: true, Name: "a"}}
	ix := NewIndex(acc, peers, access)

	tm, _ := ix.Compute("temp")
	if d := cmp.Diff([]account.PeerID{"target"}, peerIDs(tm)); d != "" || tm.AllowAll {
		t.Fatalf("temporary peer's map: allow all %v, peers (-want +got):\n%s", tm.AllowAll, d)
	}
	if d := cmp.Diff(map[ruleKey][]uint16{{ip(1).String(), Out, account.ActionAccept}: {22}}, ruleSet(tm)); d != "" {
		t.Fatalf("temporary peer's rules (-want +got):\n%s", d)
	}

	target, _ := ix.Compute("target")
	if d := cmp.Diff([]account.PeerID{"other", "third", "temp"}, peerIDs(target)); d != "" || target.AllowAll {
		t.Fatalf("target's map: allow all %v, peers (-want +got):\n%s", target.AllowAll, d)
	}
	var fromTemp []FirewallRule
	for _, r := range target.Rules {
		if r.Peer == ip(4) {
			fromTemp = append(fromTemp, r)
		}
	}
	want := []FirewallRule{{Peer: ip(4), Direction: In, Action: account.ActionAccept, Protocol: account.ProtoTCP, Ports: []uint16{22}, PolicyID: "tmp"}}
	if fmt.Sprint(want) != fmt.Sprint(fromTemp) {
		t.Fatalf("target's rules about the temporary peer: %v, want %v", fromTemp, want)
	}
	for _, other := range []netip.Addr{ip(2), ip(3)} {
		if got := ruleSet(target)[ruleKey{other.String(), In, account.ActionAccept}]; got != nil {
			t.Errorf("allow-all spelled out for %s carries ports %v", other, got)
		}
		n := 0
		for _, r := range target.Rules {
			if r.Peer == other && r.Protocol == account.ProtoAll && r.Action == account.ActionAccept {
				n++
			}
		}
		if n != 2 {
			t.Errorf("target's allow-all rules for %s: %d, want in and out", other, n)
		}
	}

	for _, id := range []account.PeerID{"other", "third"} {
		m, _ := ix.Compute(id)
		for _, p := range m.Peers {
			if p.ID == "temp" {
				t.Fatalf("%s's map lists the temporary peer", id)
			}
		}
		if !m.AllowAll || len(m.Rules) != 0 {
			t.Fatalf("%s's map: allow all %v, rules %v; want compact", id, m.AllowAll, m.Rules)
		}
	}

	// Pair agrees with Compute for every pair.
	for _, self := range peers {
		m, _ := ix.Compute(self.ID)
		for _, other := range peers {
			if other.ID == self.ID {
				continue
			}
			vis, rules := ix.Pair(self.ID, other.ID)
			listed := false
			for _, p := range m.Peers {
				listed = listed || p.ID == other.ID
			}
			var inMap []FirewallRule
			for _, r := range m.Rules {
				if r.Peer == other.IP {
					inMap = append(inMap, r)
				}
			}
			if vis != listed || !sameMap(Map{Rules: rules}, Map{Rules: inMap}) {
				t.Errorf("Pair(%s, %s) = %v %v; Compute lists it %v with %v", self.ID, other.ID, vis, rules, listed, inMap)
			}
		}
	}

	// A rename of the temporary peer is peer-local: the delta gives every
	// other peer its new map.
	renamed := append([]account.Peer(nil), peers...)
	renamed[3].Name = "b"
	acc2 := acc
	acc2.Serial++
	after := NewIndex(acc2, renamed, access)
	changes, ok := PeerLocal(ix, after)
	if !ok {
		t.Fatal("renaming the temporary peer is not peer-local")
	}
	for _, id := range []account.PeerID{"target", "other", "third"} {
		before, _ := ix.Compute(id)
		want, _ := after.Compute(id)
		if got := applyPair(before, ix, after, id, changes); !sameMap(got, want) {
			t.Errorf("%s: delta gives %s, want %s", id, describe(got), describe(want))
		}
	}
	// Removing its policy (and it) is not.
	if _, ok := PeerLocal(ix, NewIndex(acc2, peers[:3], defaults(acc.ID))); ok {
		t.Error("removing the temporary peer and its policy counted as peer-local")
	}
}
