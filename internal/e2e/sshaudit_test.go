package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// checkSSHAudit: what b's SSH server served and refused to a during
// TestSSH reached management's activity log (GET /api/events), as b's
// agent reported it: initiated by a (a key login: the source peer, not
// its owner), about b and reported by b, with the Unix user, the kind of
// session and the reason of each refusal.
func checkSSHAudit(t *testing.T, api API, ids map[string]string, ipA string) {
	t.Helper()
	type want struct {
		code string
		meta map[string]string // each must be equal, or contained for "reason"
	}
	wants := []want{
		{"peer.ssh.session.start", map[string]string{"unix_user": "root", "kind": "exec"}},
		{"peer.ssh.session.end", map[string]string{"unix_user": "root", "kind": "exec"}},
		{"peer.ssh.session.start", map[string]string{"unix_user": "root", "kind": "exec", "pty": "true"}},
		{"peer.ssh.session.start", map[string]string{"unix_user": "root", "kind": "sftp"}},
		{"peer.ssh.session.start", map[string]string{"unix_user": "root", "kind": "local_forward", "forward": "127.0.0.1:7000"}},
		{"peer.ssh.session.refused", map[string]string{"unix_user": "nobody", "reason": "disabled"}},
		// The connections open when the policy was revoked are closed by
		// the server, which says so (the refused login after it:
		// waitSSHRefused).
		{"peer.ssh.session.refused", map[string]string{"unix_user": "root", "reason": "access revoked, connection closed: no policy lets peer a."}},
	}
	var missing []string
	var events []map[string]any
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		events = getList(t, api.r, "/api/events")
		missing = nil
		for _, w := range wants {
			if !hasSSHEvent(events, w.code, w.meta, ids, ipA) {
				missing = append(missing, fmt.Sprintf("%s %v", w.code, w.meta))
			}
		}
		if len(missing) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(missing) > 0 {
		var got []string
		for _, e := range events {
			if c, _ := e["activity_code"].(string); strings.HasPrefix(c, "peer.ssh.") {
				got = append(got, fmt.Sprintf("%s initiator=%v target=%v meta=%v", c, e["initiator_id"], e["target_id"], e["meta"]))
			}
		}
		t.Errorf("activity log lacks SSH events:\n  %s\nSSH events in it:\n  %s", strings.Join(missing, "\n  "), strings.Join(got, "\n  "))
	}
}

func hasSSHEvent(events []map[string]any, code string, want map[string]string, ids map[string]string, ipA string) bool {
	for _, e := range events {
		meta, _ := e["meta"].(map[string]any)
		if e["activity_code"] != code || e["initiator_id"] != ids["a"] || e["target_id"] != ids["b"] || meta["source_ip"] != ipA || meta["source_peer_id"] != ids["a"] ||
			meta["reported_by"] != ids["b"] || meta["jwt_user"] != nil {
			continue
		}
		ok := true
		for k, v := range want {
			got, _ := meta[k].(string)
			if k == "reason" && !strings.Contains(got, v) || k != "reason" && got != v {
				ok = false
			}
		}
		if ok {
			return true
		}
	}
	return false
}

// checkSSHTokenAudit: a token login on target's SSH server from source
// reached the activity log initiated by the token's user (jwt_user),
// reported by target.
func checkSSHTokenAudit(t *testing.T, api API, target, source, user string) {
	t.Helper()
	var got []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		got = nil
		for _, e := range getList(t, api.r, "/api/events") {
			meta, _ := e["meta"].(map[string]any)
			if e["activity_code"] == "peer.ssh.session.start" && e["target_id"] == target && meta["source_peer_id"] == source {
				if e["initiator_id"] == user && meta["jwt_user"] == user && meta["reported_by"] == target {
					return
				}
				got = append(got, fmt.Sprintf("initiator=%v meta=%v", e["initiator_id"], meta))
			}
		}
	}
	t.Errorf("no SSH session start on %s from %s initiated by the token's user %s; starts seen:\n  %s", target, source, user, strings.Join(got, "\n  "))
}
