package grpcapi

import (
	"hash/maphash"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// clientForwarderPort is the port the official client (v0.77.1) asks a
// routing peer's DNS forwarder on: DNSConfig.ForwarderPort, 5353 when 0.
func clientForwarderPort(dc *mgmtpb.DNSConfig) uint16 {
	if p := uint16(dc.GetForwarderPort()); p != 0 {
		return p
	}
	return 5353
}

// TestForwarderPortOnTheWire: every peer's map, encoded as streams send it
// and decoded as the official client reads it, carries 22054 when every
// peer of the account runs 0.59.0 or later and 5353 otherwise; a peer
// whose DNS is unmanaged gets it too.
func TestForwarderPortOnTheWire(t *testing.T) {
	cases := []struct {
		name     string
		versions []string
		want     uint16
	}{
		{"all current", []string{"0.77.1", "0.59.0", "0.77.1-wiremesh-dev"}, 22054},
		{"one old", []string{"0.77.1", "0.58.2", "0.77.1"}, 5353},
		{"one unknown", []string{"0.77.1", "", "0.77.1"}, 5353},
		{"development builds", []string{"development", "dev-abc", "ci-123"}, 22054},
		{"pre-release of the first", []string{"0.77.1", "0.59.0-rc1", "0.77.1"}, 5353},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			acc, ps, access := dnsAccount()
			for i := range ps {
				ps[i].Meta.NetbirdVersion = tc.versions[i]
			}
			ix := networkmap.NewIndex(acc, ps, access)
			for _, id := range []account.PeerID{"a", "b", "c"} { // c: DNS unmanaged
				m, _ := ix.Compute(id)
				r, b := syncResponse(m, nil, respFor{}, remoteCache{})
				plain, _ := encodeMap(maphash.MakeSeed(), r, b)
				var got mgmtpb.SyncResponse
				if err := proto.Unmarshal(plain, &got); err != nil {
					t.Fatal(err)
				}
				if p := clientForwarderPort(got.GetNetworkMap().GetDNSConfig()); p != tc.want {
					t.Errorf("peer %s: forwarder port %d, want %d", id, p, tc.want)
				}
			}
		})
	}
}

// TestForwarderPortChangesEveryMap: one peer upgrading past 0.59.0 changes
// the port of every peer's map, so no stream may keep its old map.
func TestForwarderPortChangesEveryMap(t *testing.T) {
	acc, ps, access := dnsAccount()
	ps[0].Meta.NetbirdVersion, ps[1].Meta.NetbirdVersion, ps[2].Meta.NetbirdVersion = "0.77.1", "0.77.1", "0.50.0"
	old := networkmap.NewIndex(acc, ps, access)
	ps[2].Meta.NetbirdVersion = "0.77.1"
	cur := networkmap.NewIndex(acc, ps, access)
	if _, ok := networkmap.PeerLocal(old, cur); ok {
		t.Fatal("PeerLocal: a forwarder port change must recompute every map")
	}
	for _, id := range []account.PeerID{"a", "b", "c"} {
		s1, _ := old.Signature(id)
		s2, _ := cur.Signature(id)
		if s1 == s2 {
			t.Errorf("peer %s: signature unchanged across a forwarder port change", id)
		}
	}
}
