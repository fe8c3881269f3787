package e2e

import (
	"bufio"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testoidc"
)

// ssoUp runs `netbird up` without a setup key for an agent, approves the
// device code it prints as email/password (the way a person does in a
// browser on another machine) and waits until it reports Connected. It
// returns how long the login took from the prompt to Connected.
func (m *Mesh) ssoUp(a *Agent, email, password string, beforeApprove ...func()) time.Duration {
	t := m.t
	cmd := m.Lab.Cmd(a.NS, proctest.Binary(t, "netbird"), "--daemon-addr", a.Sock, "up", "-m", "http://"+netlab.PubAddr+":"+mgmtPort,
		"-n", a.Name, "--interface-name", a.Iface, "--no-browser")
	cmd.Env = append(os.Environ(), "NB_STATE_DIR="+a.Dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := make(chan string, 64)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	var url, code string
	var printed []string
	deadline := time.After(20 * time.Second)
	for code == "" {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: netbird up ended without a login prompt:\n%s", a.Name, strings.Join(printed, "\n"))
			}
			printed = append(printed, l)
			if strings.HasPrefix(l, "http://") {
				url = strings.TrimSpace(l)
			}
			if c, ok := strings.CutPrefix(l, "Code: "); ok {
				code = strings.TrimSpace(c)
			}
		case <-deadline:
			t.Fatalf("%s: no login prompt:\n%s", a.Name, strings.Join(printed, "\n"))
		}
	}
	for _, f := range beforeApprove {
		f()
	}
	start := time.Now()
	verify, _, _ := strings.Cut(url, "?")
	if err := testoidc.ApproveDevice(nsClient(m.Lab.NS("pub")), verify, code, email, password); err != nil {
		t.Fatalf("%s: approve device: %v", a.Name, err)
	}
	deadline = time.After(30 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("%s: netbird up ended before Connected:\n%s", a.Name, strings.Join(printed, "\n"))
			}
			printed = append(printed, l)
			if strings.Contains(l, "Connected") {
				return time.Since(start)
			}
		case <-deadline:
			t.Fatalf("%s: not connected after the login:\n%s", a.Name, strings.Join(printed, "\n"))
		}
	}
}

// TestSSOLogin: a person joins a machine with `netbird up` and no setup
// key, through the device flow of the all-in-one server's built-in
// identity provider; blocking the user cuts the machine off within
// seconds, and when its login expires `netbird up` asks again.
func TestSSOLogin(t *testing.T) {
	m := NewMesh(t)
	owner := m.Server.Wait(t, regexp.MustCompile(`Owner created:\s+(\S+), initial password (\S+) `), 5*time.Second)
	admin, _ := m.ownerToken(owner[1], owner[2])

	// An invited user sets a password.
	inv := admin.call("POST", "/api/users/invites", map[string]any{"email": "dev@example.com", "name": "Dev", "role": "user", "auto_groups": []string{}}, 200)
	anon := restClient{t: t, c: admin.c}
	anon.call("POST", "/api/users/invites/"+inv["invite_token"].(string)+"/accept", map[string]string{"password": "Dev-passw0rd!"}, 200)

	a := m.Agent("a", netlab.Home)
	m.Up(a)
	b := m.Agent("b", netlab.Home)
	took := m.ssoUp(b, "dev@example.com", "Dev-passw0rd!")
	t.Logf("SSO device login: approved to Connected in %v", took.Round(time.Millisecond))
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 10*time.Second); !ok {
		t.Fatal("a cannot reach the SSO peer")
	}
	if _, ok := m.WaitPing(b, ipA, 10*time.Second); !ok {
		t.Fatal("the SSO peer cannot reach a")
	}
	// The agent's metrics show the session and the connected peer.
	resp, err := nsClient(a.NS).Get("http://127.0.0.1:" + agentMetricsPort + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{"agent_management_connected 1", `agent_peers{state="Connected"} 1`, "agent_peer_connections{type="} {
		if !strings.Contains(string(body), want) {
			t.Fatalf("agent metrics lack %q:\n%s", want, body)
		}
	}

	// Block the user: within seconds a no longer reaches b, and b's daemon
	// needs a new login.
	var devID string
	for _, u := range getList(t, admin, "/api/users") {
		if u["email"] == "dev@example.com" {
			devID = u["id"].(string)
		}
	}
	admin.call("PUT", "/api/users/"+devID, map[string]any{"role": "user", "auto_groups": []string{}, "is_blocked": true}, 200)
	blocked := time.Now()
	gone := false
	for time.Since(blocked) < 10*time.Second {
		if !m.Ping(a, ipB) {
			gone = true
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !gone {
		t.Fatal("the blocked user's peer is still reachable after 10 s")
	}
	t.Logf("blocked user's peer unreachable %v after the block", time.Since(blocked).Round(time.Millisecond))
	waitStatus(t, m, b, "NeedsLogin", 10*time.Second)

	// Unblocked, the peer comes back with a plain `netbird up` (its login
	// is still valid); then the login expiration is shortened: the login
	// expires and `netbird up` asks for a new one.
	admin.call("PUT", "/api/users/"+devID, map[string]any{"role": "user", "auto_groups": []string{}, "is_blocked": false}, 200)
	if out, err := m.CLI(b, "up", "--no-browser"); err != nil || !strings.Contains(out, "Connected") {
		t.Fatalf("b: netbird up after the unblock: %v\n%s", err, out)
	}
	if _, ok := m.WaitPing(a, ipB, 10*time.Second); !ok {
		t.Fatal("a cannot reach b after the unblock and a new login")
	}
	acc := getList(t, admin, "/api/accounts")[0]["id"].(string)
	admin.call("PUT", "/api/accounts/"+acc, map[string]any{"settings": map[string]any{"peer_login_expiration_enabled": true, "peer_login_expiration": 6}}, 200)
	waitStatus(t, m, b, "NeedsLogin", 20*time.Second)
	if m.Ping(a, ipB) {
		t.Fatal("a still reaches b after its login expired")
	}
	m.ssoUp(b, "dev@example.com", "Dev-passw0rd!", func() {
		// The prompt came: the expired login was noticed. Lengthen the
		// expiration so the renewed login lasts.
		admin.call("PUT", "/api/accounts/"+acc, map[string]any{"settings": map[string]any{"peer_login_expiration_enabled": true, "peer_login_expiration": 86400}}, 200)
	})
	if _, ok := m.WaitPing(a, ipB, 10*time.Second); !ok {
		t.Fatal("a cannot reach b after the renewed login")
	}
}

// waitStatus waits until the daemon reports a status (Connected,
// NeedsLogin...).
func waitStatus(t *testing.T, m *Mesh, a *Agent, want string, within time.Duration) {
	t.Helper()
	var last string
	for start := time.Now(); time.Since(start) < within; time.Sleep(300 * time.Millisecond) {
		out, _ := m.CLI(a, "status")
		last = out
		// The daemon's own state line: "Connected" alone also matches
		// "Peers count: 0/0 Connected" while the daemon is connecting.
		if strings.Contains(out, "Daemon status: "+want+"\n") {
			return
		}
	}
	t.Fatalf("%s: daemon status is not %s after %v:\n%s", a.Name, want, within, last)
}
