package e2e

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testoidc"
)

// sshLogin runs `netbird ssh --no-browser args...` on agent x (the
// official client's or ours), approves the device code it prints for the
// JWT the peer's server asks for (as email/password, on the built-in
// identity provider's page) and returns its output and exit code. It
// returns false when no login was asked for.
func (m *Mesh) sshLogin(x *Agent, email, password string, args ...string) (string, int, bool) {
	t := m.t
	t.Helper()
	var cmd *exec.Cmd
	if x.Official != "" {
		// Its ssh command parses its own flags: the daemon's address
		// comes from the environment.
		cmd = m.Lab.Cmd(x.NS, append([]string{x.Official, "ssh", "--no-browser"}, args...)...)
	} else {
		cmd = m.Lab.Cmd(x.NS, append([]string{proctest.Binary(t, "netbird"), "--daemon-addr", x.Sock, "ssh", "--no-browser"}, args...)...)
	}
	cmd.Env = append(os.Environ(), "NB_STATE_DIR="+x.Dir, "NB_DAEMON_ADDR="+x.Sock)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pw.Close()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	var mu sync.Mutex
	var out strings.Builder
	prompt := make(chan [2]string, 1)
	read := make(chan struct{})
	// The official client: "Or visit: URL and enter code: CODE"; ours:
	// the URL on a line, then "Code: CODE".
	official := regexp.MustCompile(`visit: (\S+) and enter code: (\S+)`)
	go func() {
		defer close(read)
		sc := bufio.NewScanner(pr)
		var url string
		for sc.Scan() {
			l := sc.Text()
			mu.Lock()
			out.WriteString(l + "\n")
			mu.Unlock()
			var p [2]string
			if c := official.FindStringSubmatch(l); c != nil {
				p = [2]string{c[1], c[2]}
			} else if strings.HasPrefix(l, "http") {
				url = strings.TrimSpace(l)
			} else if c, ok := strings.CutPrefix(l, "Code: "); ok && url != "" {
				p = [2]string{url, strings.TrimSpace(c)}
			}
			if p[1] != "" {
				select {
				case prompt <- p:
				default:
				}
			}
		}
	}()
	var werr error
	asked := false
	select {
	case p := <-prompt:
		asked = true
		verify, _, _ := strings.Cut(p[0], "?")
		if err := testoidc.ApproveDevice(nsClient(m.Lab.NS("pub")), verify, p[1], email, password); err != nil {
			t.Errorf("approve the SSH login: %v", err)
		}
		select {
		case werr = <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			werr = <-done
		}
	case werr = <-done:
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		werr = <-done
	}
	<-read
	pr.Close()
	mu.Lock()
	defer mu.Unlock()
	var ee *exec.ExitError
	switch {
	case werr == nil:
		return out.String(), 0, asked
	case errors.As(werr, &ee):
		return out.String(), ee.ExitCode(), asked
	}
	t.Fatalf("netbird ssh: %v\n%s", werr, out.String())
	return "", -1, asked
}

// TestSSHOfficial: SSH between our agent and NetBird's official client
// (v0.77.1), both ways. The server has its built-in identity provider, so
// management hands SSH-enabled peers a jwtConfig and the account's users
// (sshAuth). The official `netbird ssh` sees our server's JWT marker,
// gets a token through its daemon's device flow (approved here as the
// owner) and runs a command on our agent. Our `netbird ssh` runs a command
// on an official agent's server started with --disable-ssh-auth (no
// login), and on one with the JWT check, logging in through
// management's device flow for the token the way the official client does.
func TestSSHOfficial(t *testing.T) {
	bin := officialClient(t)
	m := NewMesh(t)
	owner := m.Server.Wait(t, regexp.MustCompile(`Owner created:\s+(\S+), initial password (\S+) `), 5*time.Second)
	url := "http://" + netlab.PubAddr + ":" + mgmtPort
	a := m.Agent("a", netlab.Home)
	if out, err := m.UpAt(a, url, m.Key, "--allow-server-ssh", "--enable-ssh-root"); err != nil || !strings.Contains(out, "Connected") {
		t.Fatalf("a: up: %v\n%s", err, out)
	}
	o := m.AgentOf(bin, "o", netlab.Home)
	if out, err := m.UpAt(o, url, m.Key, "--allow-server-ssh", "--enable-ssh-root", "--disable-ssh-auth"); err != nil {
		t.Fatalf("official up: %v\n%s\n%s", err, out, tail(o.Daemon.Output()))
	}
	// p runs NetBird's JWT check (management sends jwtConfig and sshAuth).
	p := m.AgentOf(bin, "p", netlab.Home)
	if out, err := m.UpAt(p, url, m.Key, "--allow-server-ssh", "--enable-ssh-root"); err != nil {
		t.Fatalf("official up: %v\n%s\n%s", err, out, tail(p.Daemon.Output()))
	}
	api := m.OwnerAPI(t)
	ipA, ipO, ipP := IPOf(m.Status(a)), IPOf(m.Status(o)), IPOf(m.Status(p))
	// By address: the official client names itself after the host.
	for _, p := range getList(t, api.r, "/api/peers") {
		if p["ip"] == ipA || p["ip"] == ipO || p["ip"] == ipP {
			api.Call("PUT", "/api/peers/"+p["id"].(string), map[string]any{"name": p["name"], "ssh_enabled": true}, 200)
		}
	}
	if _, ok := m.WaitPing(o, ipA, 30*time.Second); !ok {
		t.Fatalf("official o cannot reach a\n%s", tail(o.Daemon.Output()))
	}

	// Official client -> our server, with a token of the built-in IdP.
	var out string
	var code int
	deadline := time.Now().Add(30 * time.Second)
	for {
		start := time.Now()
		var asked bool
		out, code, asked = m.sshLogin(o, owner[1], owner[2], "root@"+ipA, "echo official-to-ours; exit 7")
		if code == 7 {
			if !asked {
				t.Error("the official client logged in to our server without a token")
			}
			t.Logf("official netbird ssh -> our agent: token login and command in %v", time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("official -> a: exit %d\n%s\na's log:\n%s", code, out, lastLines(a.Daemon.Output(), 40))
		}
		t.Logf("official -> a: exit %d after %v, again: %s", code, time.Since(start).Round(time.Millisecond), lastLines(out, 3))
		time.Sleep(time.Second)
	}
	if !strings.Contains(out, "official-to-ours") {
		t.Errorf("official -> a: output %q", out)
	}
	if !strings.Contains(a.Daemon.Output(), "jwt_user") {
		t.Errorf("a did not log the token's user:\n%s", lastLines(a.Daemon.Output(), 20))
	}
	// a reports the session, and management records the token's user
	// (the owner) as who started it.
	peerIDs := map[string]string{}
	for _, p := range getList(t, api.r, "/api/peers") {
		peerIDs[p["ip"].(string)] = p["id"].(string)
	}
	me, _ := api.Call("GET", "/api/users/current", nil, 200)["id"].(string)
	checkSSHTokenAudit(t, api, peerIDs[ipA], peerIDs[ipO], me)

	// Our client -> the official server.
	deadline = time.Now().Add(30 * time.Second)
	for {
		start := time.Now()
		out, code = m.sshRun(a, "root@"+ipO, "echo ours-to-official; exit 5")
		if code == 5 {
			t.Logf("our netbird ssh -> official agent: command in %v", time.Since(start).Round(time.Millisecond))
			break
		}
		t.Logf("a -> official o: exit %d, again: %s", code, lastLines(out, 3))
		if time.Now().After(deadline) {
			t.Fatalf("a -> official o: exit %d\n%s\no's log:\n%s", code, out, tail(o.Daemon.Output()))
		}
		time.Sleep(time.Second)
	}
	if !strings.Contains(out, "ours-to-official") {
		t.Errorf("a -> official o: output %q", out)
	}

	// Our client -> the official server with NetBird's JWT check: the key
	// is refused, the server takes a password, and our client logs in
	// through management's device flow for the token.
	deadline = time.Now().Add(30 * time.Second)
	for {
		start := time.Now()
		out, code, asked := m.sshLogin(a, owner[1], owner[2], "root@"+ipP, "echo ours-to-official-jwt; exit 6")
		if code == 6 {
			if !asked {
				t.Error("our client logged in to the official JWT server without a token")
			}
			if !strings.Contains(out, "ours-to-official-jwt") {
				t.Errorf("a -> official p: output %q", out)
			}
			t.Logf("our netbird ssh -> official agent with JWT auth: login and command in %v", time.Since(start).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a -> official p (JWT): exit %d\n%s\np's log:\n%s", code, out, tail(p.Daemon.Output()))
		}
		t.Logf("a -> official p: exit %d, again: %s", code, lastLines(out, 3))
		time.Sleep(time.Second)
	}
	for _, x := range []*Agent{o, p} {
		if _, err := m.CLI(x, "down"); err != nil {
			t.Errorf("official down: %v", err)
		}
	}
}
