package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestSSHHostKeyMismatchReports: a host key mismatch, reported by the
// CLIENT's agent (WiremeshSSHEvents, HOST_KEY_MISMATCH), reaches GET
// /api/events as peer.ssh.hostkey.mismatch initiated and reported by the
// reporter, about the peer dialed, with both fingerprints, the port and
// the user; one dialing no other peer of the account is left out; one
// with a source address, equal fingerprints or no port writes nothing.
func TestSSHHostKeyMismatchReports(t *testing.T) { engines.Each(t, testSSHHostKeyMismatchReports) }

func testSSHHostKeyMismatchReports(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	dialed, client := testpeer.New(e.conn, "dialed"), testpeer.New(e.conn, "client")
	for _, p := range []*testpeer.Peer{dialed, client} {
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	ids, ips := map[string]string{}, map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)], ips[obj(p)["name"].(string)] = obj(p)["id"].(string), obj(p)["ip"].(string)
	}
	mc := mgmtpb.NewManagementServiceClient(e.conn)
	report := func(evs ...*mgmtpb.WiremeshSSHEvent) error {
		m, _, err := client.Seal(ctx, &mgmtpb.WiremeshSSHEventsRequest{Events: evs})
		if err != nil {
			t.Fatal(err)
		}
		_, err = mc.WiremeshSSHEvents(ctx, m)
		return err
	}
	mismatches := func() []map[string]any {
		var out []map[string]any
		for _, ev := range list(o.call("GET", "/api/events", nil, 200)) {
			if obj(ev)["activity_code"] == "peer.ssh.hostkey.mismatch" {
				out = append(out, obj(ev))
			}
		}
		return out
	}
	const presented, expected = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU", "SHA256:ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs"
	ev := func(ip string) *mgmtpb.WiremeshSSHEvent {
		return &mgmtpb.WiremeshSSHEvent{Type: mgmtpb.WiremeshSSHEvent_HOST_KEY_MISMATCH, UnixUser: "alice", At: timestamppb.New(time.Now()),
			TargetIp: ip, TargetPort: 22022, PresentedKeyFingerprint: presented, ExpectedKeyFingerprint: expected}
	}
	for name, mut := range map[string]func(*mgmtpb.WiremeshSSHEvent){
		"source_ip":                 func(e *mgmtpb.WiremeshSSHEvent) { e.SourceIp = ips["client"] },
		"presented_key_fingerprint": func(e *mgmtpb.WiremeshSSHEvent) { e.PresentedKeyFingerprint = expected },
		"expected_key_fingerprint":  func(e *mgmtpb.WiremeshSSHEvent) { e.ExpectedKeyFingerprint = "MD5:aa" },
		"target_port":               func(e *mgmtpb.WiremeshSSHEvent) { e.TargetPort = 0 },
		"target_ip":                 func(e *mgmtpb.WiremeshSSHEvent) { e.TargetIp = "dialed" },
		"kind":                      func(e *mgmtpb.WiremeshSSHEvent) { e.Kind = mgmtpb.WiremeshSSHEvent_SHELL },
	} {
		b := ev(ips["dialed"])
		mut(b)
		err := report(ev(ips["dialed"]), b)
		if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), name) {
			t.Errorf("bad %s: got %v, want InvalidArgument naming it", name, err)
		}
	}
	// A session event may not carry a mismatch's fields.
	start := &mgmtpb.WiremeshSSHEvent{Type: mgmtpb.WiremeshSSHEvent_SESSION_START, Kind: mgmtpb.WiremeshSSHEvent_SHELL, SourceIp: ips["dialed"],
		At: timestamppb.New(time.Now()), TargetIp: ips["dialed"]}
	if err := report(start); status.Code(err) != codes.InvalidArgument {
		t.Errorf("session start with a target_ip: got %v, want InvalidArgument", err)
	}
	if got := mismatches(); len(got) != 0 {
		t.Fatalf("refused reports wrote events: %v", got)
	}

	// Dialing an address no peer has, or the reporter's own: left out.
	if err := report(ev(ips["dialed"]), ev("100.64.255.254"), ev(ips["client"])); err != nil {
		t.Fatal(err)
	}
	got := mismatches()
	if len(got) != 1 {
		t.Fatalf("%d mismatch events, want 1: %v", len(got), got)
	}
	g := got[0]
	meta := obj(g["meta"])
	if g["activity"] != account.Activities["peer.ssh.hostkey.mismatch"] || g["initiator_id"] != ids["client"] || g["target_id"] != ids["dialed"] {
		t.Errorf("activity %v, initiator %v, target %v; want the reporter %s about %s", g["activity"], g["initiator_id"], g["target_id"], ids["client"], ids["dialed"])
	}
	want := map[string]string{"reported_by": ids["client"], "source_peer_id": ids["client"], "source_name": "client", "source_ip": ips["client"],
		"name": "dialed", "ip": ips["dialed"], "port": "22022", "unix_user": "alice",
		"presented_key_fingerprint": presented, "expected_key_fingerprint": expected}
	for k, v := range want {
		if meta[k] != v {
			t.Errorf("meta %s = %v, want %q (all: %v)", k, meta[k], v, meta)
		}
	}
}
