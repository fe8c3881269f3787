package e2e

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// TestPeerApproval: with peer approval on, a second agent joins pending:
// `netbird status` (plain, -d and --json) says so, it reaches nobody and
// nobody reaches it; once an admin approves it through the REST API, both
// ping each other and the status no longer says pending.
func TestPeerApproval(t *testing.T) {
	m := NewMesh(t)
	owner := m.Server.Wait(t, regexp.MustCompile(`Owner created:\s+(\S+), initial password (\S+) `), 5*time.Second)
	admin, _ := m.ownerToken(owner[1], owner[2])

	a := m.Agent("a", netlab.Home)
	m.Up(a)
	acc := getList(t, admin, "/api/accounts")[0]["id"].(string)
	admin.call("PUT", "/api/accounts/"+acc, map[string]any{"settings": map[string]any{"peer_login_expiration_enabled": true, "peer_login_expiration": 86400,
		"extra": map[string]any{"peer_approval_enabled": true, "user_approval_required": false, "network_traffic_logs_enabled": false,
			"network_traffic_logs_groups": []string{}, "network_traffic_packet_counter_enabled": false}}}, 200)

	b := m.Agent("b", netlab.Home)
	m.Up(b)
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	if ipB == "" {
		t.Fatal("the pending peer got no overlay address")
	}
	pending := func(want bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			plain, err1 := m.CLI(b, "status")
			detail, err2 := m.CLI(b, "status", "-d")
			js, err3 := m.CLI(b, "status", "--json")
			var st struct {
				Management struct {
					PendingApproval bool `json:"pendingApproval"`
				} `json:"management"`
			}
			_ = json.Unmarshal([]byte(js), &st)
			got := strings.Contains(plain, "pending approval") && strings.Contains(detail, "pending approval") && st.Management.PendingApproval
			none := !strings.Contains(plain, "pending approval") && !strings.Contains(detail, "pending approval") && !st.Management.PendingApproval
			if err1 == nil && err2 == nil && err3 == nil && ((want && got) || (!want && none)) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("b's status, want pending approval %v:\n%s\n%s\n%s", want, plain, detail, js)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	pending(true)
	if st := m.Status(b); st.Peers.Total != 0 {
		t.Fatalf("the pending peer lists %d peers", st.Peers.Total)
	}
	if st := m.Status(a); st.Peers.Total != 0 {
		t.Fatalf("a lists %d peers while b is pending", st.Peers.Total)
	}
	for i := 0; i < 3; i++ {
		if m.Ping(a, ipB) {
			t.Fatal("a reaches the pending peer")
		}
		if m.Ping(b, ipA) {
			t.Fatal("the pending peer reaches a")
		}
	}

	var id string
	for _, p := range getList(t, admin, "/api/peers") {
		if p["name"] == "b" {
			id, _ = p["id"].(string)
			if p["approval_required"] != true {
				t.Fatalf("GET /api/peers: b has approval_required %v", p["approval_required"])
			}
		}
	}
	if id == "" {
		t.Fatal("b is not in GET /api/peers")
	}
	approved := time.Now()
	admin.call("PUT", "/api/peers/"+id, map[string]any{"name": "b", "ssh_enabled": false, "login_expiration_enabled": false,
		"inactivity_expiration_enabled": false, "approval_required": false}, 200)
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatal("a cannot reach b after its approval")
	}
	t.Logf("approved to reachable in %v", time.Since(approved).Round(time.Millisecond))
	if _, ok := m.WaitPing(b, ipA, 10*time.Second); !ok {
		t.Fatal("b cannot reach a after its approval")
	}
	pending(false)
}
