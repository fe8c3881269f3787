package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestPeerApprovalREST: with settings.extra.peer_approval_enabled on, a
// peer registered with a setup key logs in but waits: its map is empty and
// no other peer's map ever lists it; the REST API shows approval_required.
// Only admins approve (PUT approval_required false), which puts it into
// both sides' maps; an admin may make it pending again while the setting
// is on (422, nothing stored, once it is off); turning the setting off
// approves every pending peer. Each step is in the audit log.
func TestPeerApprovalREST(t *testing.T) { engines.Each(t, testPeerApprovalREST) }

func testPeerApprovalREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	acc := accountOf(o)
	accID := acc["id"].(string)
	ownerID := obj(o.call("GET", "/api/users/current", nil, 200))["id"].(string)
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)

	join := func(name string) (*testpeer.Peer, *mgmtpb.LoginResponse) {
		t.Helper()
		p := testpeer.New(e.conn, name)
		lr, err := p.Login(ctx, key)
		if err != nil {
			t.Fatalf("login of %s: %v", name, err)
		}
		return p, lr
	}
	sync := func(p *testpeer.Peer) *testpeer.Stream {
		t.Helper()
		s, err := p.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		return s
	}
	// sees waits until the stream's map lists exactly want, and checks the
	// peer's own pending flag.
	sees := func(who string, s *testpeer.Stream, pending bool, want ...*testpeer.Peer) {
		t.Helper()
		var keys []keyT
		for _, p := range want {
			keys = append(keys, p.Public())
		}
		if err := s.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool {
			m := s.LatestMap()
			return testpeer.HasPeers(m, keys...) && m.GetPeerConfig().GetWiremeshPendingApproval() == pending
		}); err != nil {
			m := s.LatestMap()
			t.Fatalf("%s's map: peers %v, pending %v; want peers %v, pending %v", who, m.GetRemotePeers(), m.GetPeerConfig().GetWiremeshPendingApproval(), keys, pending)
		}
	}
	setApproval := func(on bool) {
		t.Helper()
		set := obj(accountOf(o)["settings"])
		extra := obj(set["extra"])
		extra["peer_approval_enabled"] = on
		got := obj(obj(o.call("PUT", "/api/accounts/"+accID, map[string]any{"settings": set}, 200))["settings"])
		if obj(got["extra"])["peer_approval_enabled"] != on {
			t.Fatalf("settings after turning peer approval %v: %v", on, got)
		}
	}
	peerJSON := func(name string) map[string]any {
		t.Helper()
		for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
			if obj(p)["name"] == name {
				return obj(p)
			}
		}
		t.Fatalf("%s not in GET /api/peers", name)
		return nil
	}
	update := func(as api, id, name string, required bool, want int) map[string]any {
		t.Helper()
		return obj(as.call("PUT", "/api/peers/"+id, map[string]any{"name": name, "ssh_enabled": false, "login_expiration_enabled": false,
			"approval_required": required}, want))
	}

	// Off (the default): peers join approved and see each other.
	old, _ := join("old")
	other, _ := join("other")
	so, sOther := sync(old), sync(other)
	sees("old", so, false, other)
	sees("other", sOther, false, old)
	if p := peerJSON("old"); p["approval_required"] != false {
		t.Fatalf("a peer registered with approval off: %v", p)
	}

	// On: a new peer logs in, gets its address and waits with an empty map.
	setApproval(true)
	pend, lr := join("pend")
	if lr.GetPeerConfig().GetAddress() == "" || !lr.GetPeerConfig().GetWiremeshPendingApproval() {
		t.Fatalf("pending peer's login config: %v", lr.GetPeerConfig())
	}
	if _, err := pend.Login(ctx, ""); err != nil {
		t.Fatalf("keyless relogin of the pending peer: %v", err)
	}
	sp := sync(pend)
	if m := sp.LatestMap(); len(m.GetRemotePeers()) != 0 || !m.GetRemotePeersIsEmpty() || len(m.GetFirewallRules()) != 0 || !m.GetPeerConfig().GetWiremeshPendingApproval() {
		t.Fatalf("pending peer's first map: peers %v, empty %v, rules %v, pending %v", m.GetRemotePeers(), m.GetRemotePeersIsEmpty(),
			m.GetFirewallRules(), m.GetPeerConfig().GetWiremeshPendingApproval())
	}
	p := peerJSON("pend")
	pendID := p["id"].(string)
	if p["approval_required"] != true || p["accessible_peers_count"] != float64(0) {
		t.Fatalf("pending peer in GET /api/peers: approval_required %v, accessible_peers_count %v", p["approval_required"], p["accessible_peers_count"])
	}
	if g := obj(o.call("GET", "/api/peers/"+pendID, nil, 200)); g["approval_required"] != true {
		t.Fatalf("GET /api/peers/{id} of the pending peer: %v", g)
	}
	if p := peerJSON("old"); p["approval_required"] != false {
		t.Fatalf("turning approval on made an existing peer pending: %v", p)
	}
	// No stream ever listed it, and a fresh Sync of old (the current state)
	// does not either.
	time.Sleep(500 * time.Millisecond) // the store watcher polls every 100 ms here
	for name, s := range map[string]*testpeer.Stream{"old": so, "other": sOther} {
		for _, m := range s.Messages() {
			for _, rp := range m.GetNetworkMap().GetRemotePeers() {
				if rp.GetWgPubKey() == pend.Public().String() {
					t.Fatalf("%s's map listed the pending peer", name)
				}
			}
		}
	}
	so = sync(old) // replaces old's stream
	sees("old", so, false, other)

	// Neither a user nor a network admin approves (403), and nothing changes.
	regular, _ := regularUser(t, e, o)
	netadm := obj(o.call("POST", "/api/users", map[string]any{"role": "network_admin", "is_service_user": true, "name": "net", "auto_groups": []string{}}, 200))
	netAdmin := e.api("Token " + obj(o.call("POST", "/api/users/"+netadm["id"].(string)+"/tokens", map[string]any{"name": "t", "expires_in": 1}, 200))["plain_token"].(string))
	for name, as := range map[string]api{"user": regular, "network_admin": netAdmin} {
		if g := obj(as.call("GET", "/api/peers/"+pendID, nil, 200)); g["approval_required"] != true {
			t.Fatalf("%s reads the pending peer as %v", name, g)
		}
		if msg := update(as, pendID, "pend", false, 403)["message"].(string); !strings.Contains(msg, "peers") {
			t.Fatalf("%s approving: %q", name, msg)
		}
	}
	if p := peerJSON("pend"); p["approval_required"] != true {
		t.Fatalf("a refused approval was stored: %v", p)
	}

	// The owner approves: both sides' open streams get each other.
	if g := update(o, pendID, "pend", false, 200); g["approval_required"] != false {
		t.Fatalf("PUT approval_required false answered %v", g)
	}
	sees("pend", sp, false, old, other)
	sees("old", so, false, other, pend)
	sees("other", sOther, false, old, pend)
	if g := obj(o.call("GET", "/api/peers/"+pendID, nil, 200)); g["approval_required"] != false {
		t.Fatalf("approved peer: %v", g)
	}

	// Revoked while the setting is on: pending again, out of every map.
	if g := update(o, pendID, "pend", true, 200); g["approval_required"] != true {
		t.Fatalf("PUT approval_required true answered %v", g)
	}
	sees("pend", sp, true)
	sees("old", so, false, other)
	sees("other", sOther, false, old)

	// A second pending peer; turning the setting off approves both.
	late, _ := join("late")
	if p := peerJSON("late"); p["approval_required"] != true {
		t.Fatalf("second peer registered with approval on: %v", p)
	}
	setApproval(false)
	for _, name := range []string{"pend", "late"} {
		if p := peerJSON(name); p["approval_required"] != false {
			t.Fatalf("%s after turning approval off: %v", name, p)
		}
	}
	sees("pend", sp, false, old, other, late)
	sees("old", so, false, other, pend, late)

	// With the setting off, approval_required true is refused, naming the
	// setting, and nothing is stored.
	before := len(list(o.call("GET", "/api/events/audit", nil, 200)))
	if msg := update(o, pendID, "renamed", true, 422)["message"].(string); !strings.Contains(msg, "settings.extra.peer_approval_enabled") {
		t.Fatalf("422 message %q does not name the setting", msg)
	}
	if p := peerJSON("pend"); p["approval_required"] != false {
		t.Fatalf("a refused revoke was stored: %v", p)
	}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		if obj(p)["name"] == "renamed" {
			t.Fatal("a refused PUT renamed the peer")
		}
	}
	if after := len(list(o.call("GET", "/api/events/audit", nil, 200))); after != before {
		t.Fatalf("a refused PUT recorded %d events", after-before)
	}
	time.Sleep(300 * time.Millisecond)
	sees("pend", sp, false, old, other, late)

	// The audit log: the pending registrations, one approval by the owner,
	// one revoke, and the two approvals of turning the setting off.
	var approves, revokes, offApproves int
	for _, ev := range list(o.call("GET", "/api/events/audit", nil, 200)) {
		ev := obj(ev)
		meta := obj(ev["meta"])
		switch ev["activity_code"] {
		case "peer.approve":
			approves++
			if meta["reason"] != nil {
				offApproves++
			} else if ev["target_id"] != pendID || ev["initiator_id"] != ownerID || meta["name"] != "pend" {
				t.Errorf("approval event %v", ev)
			}
		case "peer.approval.revoke":
			revokes++
			if ev["target_id"] != pendID || ev["initiator_id"] != ownerID {
				t.Errorf("revoke event %v", ev)
			}
		case "peer.setupkey.add":
			if want := map[bool]any{true: "true", false: nil}[meta["name"] == "pend" || meta["name"] == "late"]; meta["pending_approval"] != want {
				t.Errorf("registration event %v, want pending_approval %v", ev, want)
			}
		}
	}
	if approves != 3 || offApproves != 2 || revokes != 1 {
		t.Fatalf("audit: %d peer.approve (%d by turning the setting off), %d peer.approval.revoke; want 3 (2), 1", approves, offApproves, revokes)
	}
}
