package grpcapi

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// encodeMap's hand-assembled message decodes to the response it encoded,
// and its fingerprint ignores the serial but not the map or the checks.
func TestEncodeMap(t *testing.T) {
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
		plain, _ := encodeMap(r)
		var got mgmtpb.SyncResponse
		if err := proto.Unmarshal(plain, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, want) || !proto.Equal(r, want) {
			t.Fatalf("decoded %v\nwant %v (and the input unchanged)", &got, want)
		}
	}
	_, a := encodeMap(mk(1, "a"))
	_, a2 := encodeMap(mk(2, "a"))
	_, b := encodeMap(mk(1, "b"))
	_, c := encodeMap(mk(1, "a", "/x"))
	if a != a2 || a == b || a == c {
		t.Fatal("fingerprint: serial must not count; peers and checks must")
	}
}
