package mapdelta

import (
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

func peer(k string) *mgmtpb.RemotePeerConfig { return &mgmtpb.RemotePeerConfig{WgPubKey: k} }

func rule(ip string) *mgmtpb.FirewallRule {
	return &mgmtpb.FirewallRule{PeerIP: ip, Direction: mgmtpb.RuleDirection_IN, Protocol: mgmtpb.RuleProtocol_TCP, Port: "22"}
}

func TestUpdate(t *testing.T) {
	var s State
	if _, err := s.Update(&mgmtpb.SyncResponse{WiremeshDelta: &mgmtpb.NetworkMapDelta{Serial: 2}}); err == nil {
		t.Fatal("a delta before any map was accepted")
	}
	full := &mgmtpb.SyncResponse{NetworkMap: &mgmtpb.NetworkMap{Serial: 5, RemotePeers: []*mgmtpb.RemotePeerConfig{peer("a"), peer("b")},
		FirewallRules: []*mgmtpb.FirewallRule{rule("1"), rule("1"), rule("2")}}, Checks: []*mgmtpb.Checks{{Files: []string{"/x"}}}}
	if r, err := s.Update(full); err != nil || r != full {
		t.Fatal("a full map must pass through")
	}
	held := proto.Clone(full.GetNetworkMap())
	d := &mgmtpb.NetworkMapDelta{BaseSerial: 5, Serial: 7, UpsertPeers: []*mgmtpb.RemotePeerConfig{{WgPubKey: "b", Fqdn: "new"}, peer("c")},
		RemovedPeers: []string{"a"}, RemoveRules: []*mgmtpb.FirewallRule{rule("1")}, AddRules: []*mgmtpb.FirewallRule{rule("3")}}
	r, err := s.Update(&mgmtpb.SyncResponse{WiremeshDelta: d})
	if err != nil {
		t.Fatal(err)
	}
	nm := r.GetNetworkMap()
	if nm.GetSerial() != 7 || len(nm.GetRemotePeers()) != 2 || nm.GetRemotePeers()[0].GetFqdn() != "new" || nm.GetRemotePeers()[1].GetWgPubKey() != "c" {
		t.Fatalf("peers after the delta: %v", nm.GetRemotePeers())
	}
	if len(nm.GetFirewallRules()) != 3 || nm.GetFirewallRules()[0].GetPeerIP() != "1" || nm.GetFirewallRules()[2].GetPeerIP() != "3" {
		t.Fatalf("rules after the delta (one of two equal rules removed): %v", nm.GetFirewallRules())
	}
	if len(r.GetChecks()) != 1 {
		t.Fatal("posture checks of the last full map not carried")
	}
	if !proto.Equal(held, full.GetNetworkMap()) {
		t.Fatal("the delta modified the map it was applied to")
	}
	if _, err := s.Update(&mgmtpb.SyncResponse{WiremeshDelta: &mgmtpb.NetworkMapDelta{BaseSerial: 5, Serial: 8}}); err == nil {
		t.Fatal("a delta from a serial other than the map's was applied")
	}
	// Removing everything says so.
	r, _ = s.Update(&mgmtpb.SyncResponse{WiremeshDelta: &mgmtpb.NetworkMapDelta{BaseSerial: 7, Serial: 8, RemovedPeers: []string{"b", "c"},
		RemoveRules: []*mgmtpb.FirewallRule{rule("1"), rule("2"), rule("3")}}})
	if nm := r.GetNetworkMap(); !nm.GetRemotePeersIsEmpty() || !nm.GetFirewallRulesIsEmpty() || len(nm.GetRemotePeers())+len(nm.GetFirewallRules()) != 0 {
		t.Fatalf("emptied map: %v", nm)
	}
}

// FuzzApply: any map and delta (as the server could send them) apply
// without panicking, and an upserted peer is always in the result.
func FuzzApply(f *testing.F) {
	nm, _ := proto.Marshal(&mgmtpb.NetworkMap{Serial: 1, RemotePeers: []*mgmtpb.RemotePeerConfig{peer("a")}, FirewallRules: []*mgmtpb.FirewallRule{rule("1")}})
	d, _ := proto.Marshal(&mgmtpb.NetworkMapDelta{BaseSerial: 1, Serial: 2, UpsertPeers: []*mgmtpb.RemotePeerConfig{peer("b")}, RemovedPeers: []string{"a"}, RemoveRules: []*mgmtpb.FirewallRule{rule("1")}})
	f.Add(nm, d)
	f.Add([]byte{}, []byte{0x22, 0x01, 0x61})
	f.Fuzz(func(t *testing.T, nmb, db []byte) {
		var m mgmtpb.NetworkMap
		var dl mgmtpb.NetworkMapDelta
		if proto.Unmarshal(nmb, &m) != nil || proto.Unmarshal(db, &dl) != nil {
			return
		}
		out := Apply(&m, &dl)
		for _, up := range dl.GetUpsertPeers() {
			found := false
			for _, p := range out.GetRemotePeers() {
				found = found || p.GetWgPubKey() == up.GetWgPubKey()
			}
			if !found {
				t.Fatalf("upserted peer %q missing", up.GetWgPubKey())
			}
		}
	})
}
