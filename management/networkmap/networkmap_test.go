package networkmap

import (
	"net/netip"
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
)

func TestCompute(t *testing.T) {
	acc := account.Account{ID: "a", Domain: "example.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 7}
	peers := []account.Peer{
		{ID: "p3", IP: netip.MustParseAddr("100.70.0.3"), DNSLabel: "c"},
		{ID: "p1", IP: netip.MustParseAddr("100.70.0.1"), DNSLabel: "a"},
		{ID: "p2", IP: netip.MustParseAddr("100.70.0.2"), DNSLabel: "b"},
	}
	tests := []struct {
		self      account.PeerID
		wantOK    bool
		wantPeers []account.PeerID
		wantAddr  string
	}{
		{"p1", true, []account.PeerID{"p2", "p3"}, "100.70.0.1/16"},
		{"p3", true, []account.PeerID{"p1", "p2"}, "100.70.0.3/16"},
		{"gone", false, nil, ""},
	}
	for _, tc := range tests {
		m, ok := Compute(acc, peers, defaults(acc.ID), tc.self)
		if ok != tc.wantOK {
			t.Fatalf("%s: ok=%v", tc.self, ok)
		}
		if !ok {
			continue
		}
		var got []account.PeerID
		for _, p := range m.Peers {
			got = append(got, p.ID)
		}
		if len(got) != len(tc.wantPeers) {
			t.Fatalf("%s: peers %v, want %v", tc.self, got, tc.wantPeers)
		}
		for i := range got {
			if got[i] != tc.wantPeers[i] {
				t.Fatalf("%s: peers %v, want %v", tc.self, got, tc.wantPeers)
			}
		}
		if m.Address() != tc.wantAddr || m.Serial != 7 || m.Self.ID != tc.self {
			t.Fatalf("%s: address %s serial %d", tc.self, m.Address(), m.Serial)
		}
	}
	// A lone peer gets an empty list, not itself.
	m, ok := Compute(acc, peers[:1], defaults(acc.ID), "p3")
	if !ok || len(m.Peers) != 0 {
		t.Fatalf("lone peer: %v %v", ok, m.Peers)
	}
}

func defaults(acc account.ID) Access {
	all := account.Group{ID: "all", AccountID: acc, Name: "All", All: true}
	return Access{Groups: []account.Group{all}, Policies: []account.Policy{{ID: "default", Name: "Default", Enabled: true,
		Rules: []account.Rule{{ID: "r", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll, Bidirectional: true,
			Sources: []account.GroupID{"all"}, Destinations: []account.GroupID{"all"}}}}}}
}

func peerIDs(m Map) []account.PeerID {
	var out []account.PeerID
	for _, p := range m.Peers {
		out = append(out, p.ID)
	}
	return out
}

type ruleKey struct {
	peer string
	dir  Direction
	act  string
}

func ruleSet(m Map) map[ruleKey][]uint16 {
	out := map[ruleKey][]uint16{}
	for _, r := range m.Rules {
		k := ruleKey{r.Peer.String(), r.Direction, r.Action}
		out[k] = append(out[k], r.Ports...)
	}
	return out
}

// TestPolicies covers one-way, bidirectional, disabled, overlapping and
// drop rules, and peers outside every policy.
func TestPolicies(t *testing.T) {
	acc := account.Account{ID: "a", Network: netip.MustParsePrefix("100.70.0.0/16")}
	ip := func(n byte) netip.Addr { return netip.AddrFrom4([4]byte{100, 70, 0, n}) }
	peers := []account.Peer{{ID: "a1", IP: ip(1)}, {ID: "a2", IP: ip(2)}, {ID: "b1", IP: ip(11)}, {ID: "c1", IP: ip(21)}, {ID: "lone", IP: ip(31)}}
	groups := []account.Group{
		{ID: "all", All: true}, {ID: "A", Peers: []account.PeerID{"a1", "a2"}}, {ID: "B", Peers: []account.PeerID{"b1", "gone"}},
		{ID: "C", Peers: []account.PeerID{"c1"}},
	}
	ssh := account.Rule{ID: "ssh", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoTCP, Ports: []uint16{22},
		Sources: []account.GroupID{"A"}, Destinations: []account.GroupID{"B"}}
	web := account.Rule{ID: "web", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoTCP, Ports: []uint16{80, 443},
		Sources: []account.GroupID{"A"}, Destinations: []account.GroupID{"B"}}
	off := account.Rule{ID: "off", Enabled: false, Action: account.ActionAccept, Protocol: account.ProtoAll,
		Sources: []account.GroupID{"C"}, Destinations: []account.GroupID{"B"}}
	mutual := account.Rule{ID: "mutual", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoUDP, Bidirectional: true,
		Sources: []account.GroupID{"B"}, Destinations: []account.GroupID{"C"}}
	deny := account.Rule{ID: "deny", Enabled: true, Action: account.ActionDrop, Protocol: account.ProtoICMP,
		Sources: []account.GroupID{"A"}, Destinations: []account.GroupID{"B"}}
	access := Access{Groups: groups, Policies: []account.Policy{
		{ID: "p1", Enabled: true, Rules: []account.Rule{ssh, off}},
		{ID: "p2", Enabled: true, Rules: []account.Rule{web, mutual, deny}},
		{ID: "p3", Enabled: false, Rules: []account.Rule{{ID: "x", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll,
			Sources: []account.GroupID{"all"}, Destinations: []account.GroupID{"all"}, Bidirectional: true}}},
	}}
	get := func(self account.PeerID) Map {
		m, ok := Compute(acc, peers, access, self)
		if !ok {
			t.Fatalf("%s missing", self)
		}
		if m.AllowAll {
			t.Fatalf("%s: a disabled all-to-all policy applied", self)
		}
		return m
	}
	// a1 may open tcp/22, 80, 443 to b1 (one way), and is denied ICMP.
	m := get("a1")
	if got := peerIDs(m); len(got) != 1 || got[0] != "b1" {
		t.Fatalf("a1 sees %v", got)
	}
	rs := ruleSet(m)
	if p := rs[ruleKey{"100.70.0.11", Out, account.ActionAccept}]; len(p) != 3 {
		t.Fatalf("a1 out rules to b1: %v (all: %+v)", p, m.Rules)
	}
	if _, ok := rs[ruleKey{"100.70.0.11", In, account.ActionAccept}]; ok {
		t.Fatal("one-way rule gave a1 an inbound accept from b1")
	}
	if _, ok := rs[ruleKey{"100.70.0.11", Out, account.ActionDrop}]; !ok {
		t.Fatal("a1 lacks the drop rule towards b1")
	}
	// b1 accepts those from a1 and a2, and talks UDP both ways with c1;
	// the disabled rule from C does not count.
	m = get("b1")
	if got := peerIDs(m); len(got) != 3 {
		t.Fatalf("b1 sees %v", got)
	}
	rs = ruleSet(m)
	if p := rs[ruleKey{"100.70.0.1", In, account.ActionAccept}]; len(p) != 3 {
		t.Fatalf("b1 in rules from a1: %v", p)
	}
	if _, ok := rs[ruleKey{"100.70.0.1", Out, account.ActionAccept}]; ok {
		t.Fatal("b1 may open connections to a1")
	}
	for _, d := range []Direction{In, Out} {
		if _, ok := rs[ruleKey{"100.70.0.21", d, account.ActionAccept}]; !ok {
			t.Fatalf("b1 <-> c1 bidirectional rule lacks direction %d", d)
		}
	}
	// c1 only sees b1 (the C -> B all rule is disabled, and UDP is mutual).
	if got := peerIDs(get("c1")); len(got) != 1 || got[0] != "b1" {
		t.Fatalf("c1 sees %v", got)
	}
	// A peer outside every policy sees nobody and nobody sees it.
	if got := peerIDs(get("lone")); len(got) != 0 {
		t.Fatalf("lone sees %v", got)
	}
	for _, id := range []account.PeerID{"a1", "a2", "b1", "c1"} {
		for _, p := range get(id).Peers {
			if p.ID == "lone" {
				t.Fatalf("%s sees the peer outside every policy", id)
			}
		}
	}
	// Enabling the all-to-all policy allows everything; the drop stays.
	access.Policies[2].Enabled = true
	m, _ = Compute(acc, peers, access, "a1")
	if !m.AllowAll || len(m.Peers) != 4 {
		t.Fatalf("all-to-all: allow %v, peers %v", m.AllowAll, peerIDs(m))
	}
	for _, r := range m.Rules {
		if r.Action != account.ActionDrop {
			t.Fatalf("accept rule %+v kept beside allow-all", r)
		}
	}
}

// TestSignature: a change that cannot affect a peer's map leaves its
// signature, one that does changes it.
func TestSignature(t *testing.T) {
	acc := account.Account{ID: "a", Network: netip.MustParsePrefix("100.70.0.0/16")}
	ip := func(n byte) netip.Addr { return netip.AddrFrom4([4]byte{100, 70, 0, n}) }
	peers := []account.Peer{{ID: "a1", IP: ip(1)}, {ID: "b1", IP: ip(2)}, {ID: "c1", IP: ip(3)}}
	base := Access{Groups: []account.Group{{ID: "all", All: true}, {ID: "A", Peers: []account.PeerID{"a1"}}, {ID: "B", Peers: []account.PeerID{"b1"}}},
		Policies: []account.Policy{{ID: "p", Enabled: true, Rules: []account.Rule{{ID: "r", Enabled: true, Action: account.ActionAccept,
			Protocol: account.ProtoTCP, Ports: []uint16{22}, Sources: []account.GroupID{"A"}, Destinations: []account.GroupID{"B"}}}}}}
	sig := func(ps []account.Peer, a Access, id account.PeerID) Sig {
		s, ok := NewIndex(acc, ps, a).Signature(id)
		if !ok {
			t.Fatalf("no signature for %s", id)
		}
		return s
	}
	before := map[account.PeerID]Sig{}
	for _, p := range peers {
		before[p.ID] = sig(peers, base, p.ID)
	}
	// A new group nobody's rules name: nothing changes.
	unrelated := base
	unrelated.Groups = append(append([]account.Group(nil), base.Groups...), account.Group{ID: "C", Peers: []account.PeerID{"c1"}})
	for _, p := range peers {
		if sig(peers, unrelated, p.ID) != before[p.ID] {
			t.Errorf("%s's signature moved on an unrelated group", p.ID)
		}
	}
	// c1 renamed: a1 and b1 do not see it.
	renamed := append([]account.Peer(nil), peers...)
	renamed[2].DNSLabel = "new"
	if sig(renamed, base, "a1") != before["a1"] || sig(renamed, base, "c1") == before["c1"] {
		t.Error("rename of c1: wrong signatures")
	}
	// The rule's port changes: a1 and b1 are affected, c1 is not.
	ported := base
	ported.Policies = []account.Policy{base.Policies[0]}
	ported.Policies[0].Rules = []account.Rule{base.Policies[0].Rules[0]}
	ported.Policies[0].Rules[0].Ports = []uint16{2222}
	if sig(peers, ported, "a1") == before["a1"] || sig(peers, ported, "b1") == before["b1"] || sig(peers, ported, "c1") != before["c1"] {
		t.Error("port change: wrong signatures")
	}
	// b1's key changes: a1 sees it.
	rekeyed := append([]account.Peer(nil), peers...)
	rekeyed[1].SSHPubKey = "ssh-ed25519 AAAA"
	if sig(rekeyed, base, "a1") == before["a1"] || sig(rekeyed, base, "c1") != before["c1"] {
		t.Error("b1's record change: wrong signatures")
	}
}
