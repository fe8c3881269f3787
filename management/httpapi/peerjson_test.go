package httpapi

import (
	"bytes"
	"encoding/json"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// encodingJSON is what ok writes for v.
func encodingJSON(t testing.TB, v any) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.NewEncoder(&b).Encode(v); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// TestPeerJSONMatchesEncodingJSON: the hand-written peer encoder writes
// exactly what encoding/json writes, strings that need escaping included.
func TestPeerJSONMatchesEncodingJSON(t *testing.T) {
	n := 7
	strs := []string{"", "plain", `quote " and \ backslash`, "<script>&amp;</script>", "tab\there\nnewline\x00nul\x1f", "ünïcødé 日本",
		"line\u2028sep\u2029", "bad utf8 \xff\xfe", "del \x7f", "emoji 🚀"}
	var ps []peerJSON
	for i, s := range strs {
		p := peerJSON{ID: s, Name: s, CreatedAt: s, IP: s, IPv6: s[:i%2*len(s)], ConnectionIP: s, Connected: i%2 == 0, LastSeen: s, OS: s, KernelVersion: s, GeonameID: i - 3,
			Version: s, UIVersion: s, SSHEnabled: i%3 == 0, UserID: s, Hostname: s, DNSLabel: s, LoginExpirationEnabled: i%2 == 1, LoginExpired: i%4 == 0,
			LastLogin: s, InactivityExpirationEnabled: true, ApprovalRequired: i%5 == 0, CountryCode: s, CityName: s, SerialNumber: s, Ephemeral: i%2 == 0,
			LocalFlags: localFlagsJSON{RosenpassEnabled: i%2 == 0, ServerSSHAllowed: i%3 == 0, DisableClientRoutes: i%2 == 1, DisableServerRoutes: i%3 == 1,
				DisableDNS: i%4 == 1, DisableFirewall: i%5 == 1, BlockLANAccess: i%3 == 2, BlockInbound: i%4 == 2, LazyConnectionEnabled: i%2 == 0, RosenpassPermissive: i%5 == 2}}
		switch i % 3 {
		case 0:
			p.Groups, p.ExtraDNSLabels = []groupMinimum{}, []string{}
		case 1:
			p.Groups = []groupMinimum{{ID: s, Name: s, PeersCount: i, ResourcesCount: 0}, {ID: "g2", Name: "All", PeersCount: 10000}}
			p.ExtraDNSLabels = []string{s, "x"}
			p.AccessiblePeersCount = &n
		}
		if i%2 == 1 { // a connection report (our extension)
			ms := float64(i) * 0.137
			p.Connections = &connCounts{P2P: i, Relayed: 1, Connecting: i % 3}
			p.PeerConnections = []peerConnJSON{{PeerID: s, Type: "p2p", LatencyMS: &ms}, {PeerID: "x", Type: "connecting"}}
		}
		ps = append(ps, p)
	}
	for _, list := range [][]peerJSON{nil, {}, ps[:1], ps} {
		want := encodingJSON(t, list)
		if list == nil {
			want = encodingJSON(t, []peerJSON{})
		}
		if got := string(appendPeers(nil, list)); got != want {
			t.Errorf("appendPeers differs from encoding/json (-want +got):\n%s", cmp.Diff(want, got))
		}
	}
}

// FuzzPeerJSON: any string a peer reports is encoded as encoding/json
// encodes it (and so is valid JSON). Seeds in testdata/fuzz too.
func FuzzPeerJSON(f *testing.F) {
	for _, s := range []string{"", "a", "<>&", "\u2028", "\xff", `"\`, "\x00"} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, s string, n int) {
		p := peerJSON{ID: s, Name: s, OS: s, Hostname: s, Groups: []groupMinimum{{ID: s, Name: s, PeersCount: n}}, ExtraDNSLabels: []string{s}, AccessiblePeersCount: &n}
		want := encodingJSON(t, []peerJSON{p})
		got := string(appendPeers(nil, []peerJSON{p}))
		if !json.Valid([]byte(got)) {
			t.Fatalf("not valid JSON: %s", got)
		}
		if got != want {
			t.Fatalf("differs from encoding/json (-want +got):\n%s", cmp.Diff(want, got))
		}
	})
}

// FuzzPeerListJSON: a peer as the cached list writes it (its parts
// encoded once, spliced around the state, count and connections of the
// answer: encodePeerList, appendPeer) is valid JSON and exactly what
// encoding/json writes for the typed peer, whatever strings the peer,
// its agent and its groups report. Seeds in testdata/fuzz.
func FuzzPeerListJSON(f *testing.F) {
	f.Add("laptop", "Debian GNU/Linux", "all", true, int64(1_700_000_000), 3, 1)
	f.Add("<b>&\"x\"\\", "\u2028\u2029", "\xff\xfe", false, int64(0), 0, -1)
	f.Fuzz(func(t *testing.T, name, os, group string, connected bool, seen int64, count, conns int) {
		base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		acc := account.Account{ID: "acc", Domain: "netbird.selfhosted", Settings: account.Settings{PeerLoginExpirationEnabled: true, PeerLoginExpiration: 3600}}
		p := account.Peer{ID: account.PeerID("p-" + name), AccountID: acc.ID, Name: name, DNSLabel: name, IP: netip.MustParseAddr("100.64.0.1"),
			Meta:      account.Meta{Hostname: name, OS: os, OSVersion: name, KernelVersion: os, NetbirdVersion: name, UIVersion: os, SerialNumber: group},
			CreatedAt: base, LastLogin: base.Add(-2 * time.Hour), LastSeen: base, LoginExpirationEnabled: connected, UserID: account.UserID(group)}
		v := peerView{acc: acc, peers: []account.Peer{p}, ids: []account.PeerID{p.ID},
			groups: []account.Group{{ID: "g-all", Name: "All", Peers: []account.PeerID{p.ID}}, {ID: account.GroupID("g-" + group), Name: group, Peers: []account.PeerID{p.ID}}}}
		v.index()
		l := encodePeerList(v, 1, base)
		var cs *connCounts
		if conns >= 0 {
			cs = &connCounts{P2P: conns, Relayed: conns / 2, Connecting: 1}
		}
		s := store.PeerState{ID: p.ID, Connected: connected, LastSeen: time.Unix(seen, 0).UTC()}
		got := l.appendPeer(nil, 0, s, base, count, cs, nil)
		if !json.Valid(got) {
			t.Fatalf("not valid JSON: %s", got)
		}
		// The reference: the typed peer with this answer's live fields.
		p.Connected, p.LastSeen = s.Connected, s.LastSeen
		want := v.toPeer(p, base)
		if count >= 0 {
			want.AccessiblePeersCount = &count
		}
		want.Connections = cs
		if w := encodingJSON(t, want); string(got)+"\n" != w {
			t.Fatalf("differs from encoding/json (-want +got):\n%s", cmp.Diff(w, string(got)+"\n"))
		}
	})
}
