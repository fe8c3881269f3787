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
		m, ok := Compute(acc, peers, tc.self)
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
	m, ok := Compute(acc, peers[:1], "p3")
	if !ok || len(m.Peers) != 0 {
		t.Fatalf("lone peer: %v %v", ok, m.Peers)
	}
}
