package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// checkSSHHostKeyAudit: the forged host key a's `netbird ssh` refused
// during TestSSH reached management's activity log through a's daemon
// (peer.ssh.hostkey.mismatch): initiated and reported by a, about b,
// with the forged key's fingerprint as presented, b's own key's as
// expected, the port and the user ("" through `netbird ssh proxy`).
func checkSSHHostKeyAudit(t *testing.T, api API, ids map[string]string, ipB string, forged ssh.PublicKey, b *Agent, user string) {
	t.Helper()
	want := map[string]string{"reported_by": ids["a"], "source_peer_id": ids["a"], "ip": ipB, "port": "22022", "unix_user": user,
		"presented_key_fingerprint": ssh.FingerprintSHA256(forged), "expected_key_fingerprint": ssh.FingerprintSHA256(agentSSHKey(t, b).PublicKey())}
	var got []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		got = nil
		for _, e := range getList(t, api.r, "/api/events") {
			if e["activity_code"] != "peer.ssh.hostkey.mismatch" {
				continue
			}
			meta, _ := e["meta"].(map[string]any)
			ok := e["initiator_id"] == ids["a"] && e["target_id"] == ids["b"]
			for k, v := range want {
				ok = ok && meta[k] == v
			}
			if ok {
				return
			}
			got = append(got, fmt.Sprintf("initiator=%v target=%v meta=%v", e["initiator_id"], e["target_id"], meta))
		}
	}
	t.Errorf("no peer.ssh.hostkey.mismatch by a (%s) about b (%s) with meta %v; mismatch events seen:\n  %s", ids["a"], ids["b"], want, strings.Join(got, "\n  "))
}
