package main

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// scanOracle is what scan must find, computed from the decoded message.
func scanOracle(r *mgmtpb.SyncResponse, want string) (isMap, listed bool) {
	peers := append(r.GetNetworkMap().GetRemotePeers(), r.GetWiremeshDelta().GetUpsertPeers()...)
	for _, p := range peers {
		if want != "" && p.GetWgPubKey() == want {
			listed = true
		}
	}
	return r.NetworkMap != nil || r.WiremeshDelta != nil, listed
}

func scanSeeds() []*mgmtpb.SyncResponse {
	peer := func(k string) *mgmtpb.RemotePeerConfig {
		return &mgmtpb.RemotePeerConfig{WgPubKey: k, AllowedIps: []string{"100.64.0.2/32"}, Fqdn: k + ".netbird.selfhosted"}
	}
	return []*mgmtpb.SyncResponse{
		{},
		{NetbirdConfig: &mgmtpb.NetbirdConfig{}},
		{NetworkMap: &mgmtpb.NetworkMap{Serial: 3}},
		{NetworkMap: &mgmtpb.NetworkMap{Serial: 4, RemotePeers: []*mgmtpb.RemotePeerConfig{peer("a"), peer("probe")}},
			PeerConfig: &mgmtpb.PeerConfig{Address: "100.64.0.1/16"}},
		{NetworkMap: &mgmtpb.NetworkMap{RemotePeers: []*mgmtpb.RemotePeerConfig{peer("a")}}},
		{WiremeshDelta: &mgmtpb.NetworkMapDelta{BaseSerial: 4, Serial: 5, UpsertPeers: []*mgmtpb.RemotePeerConfig{peer("probe")}, RemovedPeers: []string{"probe"}}},
		{WiremeshDelta: &mgmtpb.NetworkMapDelta{RemovedPeers: []string{"probe"}}},
	}
}

func TestScan(t *testing.T) {
	for i, r := range scanSeeds() {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"", "probe", "a", "b"} {
			isMap, listed, err := scan(b, want)
			wm, wl := scanOracle(r, want)
			if err != nil || isMap != wm || listed != wl {
				t.Errorf("seed %d, want %q: scan = %v, %v, %v; unmarshaled: %v, %v", i, want, isMap, listed, err, wm, wl)
			}
		}
	}
	if _, _, err := scan([]byte{0x2a, 0x05, 0x01}, "x"); err == nil {
		t.Error("a truncated map scanned without error")
	}
}

// FuzzScan: on anything that unmarshals, scan agrees with the decoded
// message; on anything else it returns, whatever it finds.
func FuzzScan(f *testing.F) {
	for _, r := range scanSeeds() {
		b, _ := proto.Marshal(r)
		f.Add(b, "probe")
	}
	f.Fuzz(func(t *testing.T, b []byte, want string) {
		isMap, listed, err := scan(b, want)
		var r mgmtpb.SyncResponse
		if proto.Unmarshal(b, &r) != nil {
			return
		}
		wm, wl := scanOracle(&r, want)
		if err != nil || isMap != wm || listed != wl {
			t.Fatalf("scan = %v, %v, %v; unmarshaled: %v, %v", isMap, listed, err, wm, wl)
		}
	})
}
