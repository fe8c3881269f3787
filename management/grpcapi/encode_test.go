package grpcapi

import (
	"hash/maphash"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// encodeMap's hand-assembled message decodes to the response it encoded,
// and its fingerprint ignores the serial but not the map or the checks.
func TestEncodeMap(t *testing.T) {
	seed := maphash.MakeSeed()
	mk := func(serial uint64, peer string, files ...string) *mgmtpb.SyncResponse {
		nm := &mgmtpb.NetworkMap{Serial: serial, PeerConfig: &mgmtpb.PeerConfig{Address: "100.64.0.1/16"},
			RemotePeers: []*mgmtpb.RemotePeerConfig{{WgPubKey: peer, AllowedIps: []string{"100.64.0.2/32"}}}, FirewallRulesIsEmpty: true}
		r := &mgmtpb.SyncResponse{NetworkMap: nm, NetbirdConfig: &mgmtpb.NetbirdConfig{Signal: &mgmtpb.HostConfig{Uri: "s:1"}},
			RemotePeers: nm.RemotePeers, PeerConfig: nm.PeerConfig}
		if len(files) > 0 {
			r.Checks = []*mgmtpb.Checks{{Files: files}}
		}
		return r
	}
	for _, r := range []*mgmtpb.SyncResponse{mk(0, "a"), mk(7, "a"), mk(1<<40, "b", "/x", "/y"), {NetworkMap: &mgmtpb.NetworkMap{}}} {
		want := proto.Clone(r)
		plain, _ := encodeMap(seed, r, nil)
		var got mgmtpb.SyncResponse
		if err := proto.Unmarshal(plain, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, want) || !proto.Equal(r, want) {
			t.Fatalf("decoded %v\nwant %v (and the input unchanged)", &got, want)
		}
	}
	_, a := encodeMap(seed, mk(1, "a"), nil)
	_, a2 := encodeMap(seed, mk(2, "a"), nil)
	_, b := encodeMap(seed, mk(1, "b"), nil)
	_, c := encodeMap(seed, mk(1, "a", "/x"), nil)
	if a != a2 || a == b || a == c {
		t.Fatal("fingerprint: serial must not count; peers and checks must")
	}
}

// TestEncodeBulk: a whole map whose peers and DNS records come
// pre-marshaled from the account state decodes to the same response as
// one encoded field by field, and its fingerprint follows the map.
func TestEncodeBulk(t *testing.T) {
	seed := maphash.MakeSeed()
	acc, ps, ix := allToAll(50)
	cache := remoteCache{}
	for i := range ps[:40] { // the others are built on the fly
		cache[ps[i].ID] = newShown(&ps[i], acc.Domain, ix.IsV6(ps[i].ID))
	}
	fps := map[uint64]bool{}
	for _, self := range []account.PeerID{"p0", "p45", "p7"} {
		m, _ := ix.Compute(self)
		r, b := syncResponse(m, &mgmtpb.NetbirdConfig{Signal: &mgmtpb.HostConfig{Uri: "s:1"}}, respFor{legacy: true}, cache)
		if len(b.peers) != 49 || len(b.records) != 50 {
			t.Fatalf("bulk: %d peers, %d records", len(b.peers), len(b.records))
		}
		want := proto.Clone(r)
		plain, fp := encodeMap(seed, r, b)
		var got mgmtpb.SyncResponse
		if err := proto.Unmarshal(plain, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, want) || !proto.Equal(r, want) {
			t.Fatalf("%s: decoded %v\nwant %v (and the input unchanged)", self, &got, want)
		}
		if _, again := encodeMap(seed, r, b); again != fp {
			t.Fatal("fingerprint not stable")
		}
		fps[fp] = true
	}
	if len(fps) != 3 {
		t.Fatal("different maps share a fingerprint")
	}
}
