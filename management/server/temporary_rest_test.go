package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestTemporaryAccessREST: POST /api/peers/{id}/temporary-access refuses
// bad requests naming the field (nothing stored) and callers who may not
// create peers; a temporary peer it creates logs in over gRPC with its key
// alone, its map holds only the target, the target's map holds it with
// only the requested ports, no other map lists it; when its Sync stream
// ends it and its policies are gone, with the activity-log entries.
func TestTemporaryAccessREST(t *testing.T) { engines.Each(t, testTemporaryAccessREST) }

func testTemporaryAccessREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sk := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	join := func(name string) (*testpeer.Peer, *testpeer.Stream) {
		t.Helper()
		p := testpeer.New(e.conn, name)
		if _, err := p.Login(ctx, sk); err != nil {
			t.Fatalf("login of %s: %v", name, err)
		}
		s, err := p.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return p, s
	}
	target, st := join("target")
	other, so := join("other")
	var targetID string
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		if obj(p)["name"] == "target" {
			targetID = obj(p)["id"].(string)
		}
	}
	path := "/api/peers/" + targetID + "/temporary-access"
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	good := map[string]any{"name": "browser-ssh", "wg_pub_key": priv.Public().String(), "rules": []string{"tcp/22"}}
	with := func(field string, v any) map[string]any {
		m := map[string]any{}
		for k, x := range good {
			m[k] = x
		}
		if v == nil {
			delete(m, field)
		} else {
			m[field] = v
		}
		return m
	}
	count := func(p string) int { return len(list(o.call("GET", p, nil, 200))) }
	peers0, policies0 := count("/api/peers"), count("/api/policies")

	for _, tc := range []struct {
		name  string
		path  string
		body  any
		code  int
		field string
	}{
		{"no name", path, with("name", nil), 400, "name"},
		{"no key", path, with("wg_pub_key", nil), 400, "wg_pub_key"},
		{"no rules", path, with("rules", nil), 400, "rules"},
		{"not JSON", path, "{", 400, "json"},
		{"empty name", path, with("name", " "), 422, "name"},
		{"long name", path, with("name", strings.Repeat("a", 64)), 422, "name"},
		{"bad key", path, with("wg_pub_key", "bm90IGEga2V5"), 422, "wg_pub_key"},
		{"empty rules", path, with("rules", []string{}), 422, "rules"},
		{"bad port", path, with("rules", []string{"tcp/70000"}), 422, "rules"},
		{"bad protocol", path, with("rules", []string{"sctp/22"}), 422, "rules"},
		{"taken key", path, with("wg_pub_key", other.Public().String()), 409, "wg_pub_key"},
		{"unknown target", "/api/peers/nope/temporary-access", good, 404, ""},
	} {
		got := obj(o.call("POST", tc.path, tc.body, tc.code))
		if !strings.Contains(strings.ToLower(got["message"].(string)), tc.field) {
			t.Errorf("%s: message %q does not name %s", tc.name, got["message"], tc.field)
		}
	}
	regular, _ := regularUser(t, e, o)
	regular.call("POST", path, good, 403)
	if p, q := count("/api/peers"), count("/api/policies"); p != peers0 || q != policies0 {
		t.Fatalf("refused requests stored something: %d peers, %d policies; want %d and %d", p, q, peers0, policies0)
	}

	created := obj(o.call("POST", path, good, 200))
	tempID, _ := created["id"].(string)
	if created["name"] != "browser-ssh" || tempID == "" || len(list(created["rules"])) != 1 {
		t.Fatalf("answer %v", created)
	}
	tj := obj(o.call("GET", "/api/peers/"+tempID, nil, 200))
	if tj["ephemeral"] != true || tj["approval_required"] != false || tj["ip"] == "" || tj["os"] != "js" {
		t.Fatalf("temporary peer in GET /api/peers/{id}: %v", tj)
	}
	if count("/api/policies") != policies0+1 {
		t.Fatal("no policy for the temporary peer")
	}

	// The browser logs in with the key alone and syncs.
	temp := testpeer.WithKey(e.conn, "browser-ssh", priv)
	if _, err := temp.Login(ctx, ""); err != nil {
		t.Fatalf("keyless login of the temporary peer: %v", err)
	}
	stemp, err := temp.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stemp.Close()
	waitMap := func(who string, s *testpeer.Stream, cond func(*mgmtpb.NetworkMap) bool) *mgmtpb.NetworkMap {
		t.Helper()
		if err := s.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool { return cond(s.LatestMap()) }); err != nil {
			m := s.LatestMap()
			t.Fatalf("%s's map: peers %v, rules %v", who, m.GetRemotePeers(), m.GetFirewallRules())
		}
		return s.LatestMap()
	}
	tempIP := tj["ip"].(string)
	tm := waitMap("temporary", stemp, func(m *mgmtpb.NetworkMap) bool { return testpeer.HasPeers(m, target.Public()) })
	for _, r := range tm.GetFirewallRules() {
		if r.GetDirection() != mgmtpb.RuleDirection_OUT || r.GetPort() != "22" {
			t.Errorf("temporary peer's rule %v: want only out to port 22", r)
		}
	}
	waitMap("target", st, func(m *mgmtpb.NetworkMap) bool { return testpeer.HasPeers(m, other.Public(), temp.Public()) })
	tgt := st.LatestMap()
	var fromTemp []*mgmtpb.FirewallRule
	for _, r := range tgt.GetFirewallRules() {
		if r.GetPeerIP() == "0.0.0.0" {
			t.Errorf("target's map still allows everyone at once: %v", r)
		}
		if r.GetPeerIP() == tempIP {
			fromTemp = append(fromTemp, r)
		}
	}
	if len(fromTemp) != 1 || fromTemp[0].GetDirection() != mgmtpb.RuleDirection_IN || fromTemp[0].GetProtocol() != mgmtpb.RuleProtocol_TCP || fromTemp[0].GetPort() != "22" {
		t.Fatalf("target's rules about the temporary peer: %v, want one: in, tcp, 22", fromTemp)
	}
	time.Sleep(300 * time.Millisecond)
	for _, m := range so.Messages() {
		for _, rp := range m.GetNetworkMap().GetRemotePeers() {
			if rp.GetWgPubKey() == temp.Public().String() {
				t.Fatal("another peer's map listed the temporary peer")
			}
		}
	}
	if !testpeer.HasPeers(so.LatestMap(), target.Public()) {
		t.Fatalf("other's map: %v", so.LatestMap().GetRemotePeers())
	}

	// The browser goes: its peer and policy go with it.
	stemp.Close()
	deadline := time.Now().Add(5 * time.Second)
	for count("/api/peers") != peers0 {
		if time.Now().After(deadline) {
			t.Fatal("temporary peer still there after its stream ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	o.call("GET", "/api/peers/"+tempID, nil, 404)
	if n := count("/api/policies"); n != policies0 {
		t.Fatalf("%d policies after the temporary peer left, want %d", n, policies0)
	}
	waitMap("target", st, func(m *mgmtpb.NetworkMap) bool { return testpeer.HasPeers(m, other.Public()) })
	codes := map[string]int{}
	for _, ev := range list(o.call("GET", "/api/events", nil, 200)) {
		codes[obj(ev)["activity_code"].(string)]++
	}
	for c, n := range map[string]int{"peer.user.add": 1, "policy.add": 1, "policy.delete": 1, "user.peer.delete": 1} {
		if codes[c] < n {
			t.Errorf("events: %d %s, want %d (all: %v)", codes[c], c, n, codes)
		}
	}
	if _, err := temp.Login(ctx, ""); err == nil {
		t.Fatal("the removed temporary peer still logs in")
	}
}
