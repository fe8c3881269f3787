package e2e

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

// TestAgentKilled: an agent killed with SIGKILL leaves no interface behind
// and, restarted, brings its session back by itself with the same key and
// address.
func TestAgentKilled(t *testing.T) {
	m := NewMesh(t)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	before := m.Status(a)
	ipB := IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 10*time.Second); !ok {
		t.Fatal("a cannot reach b")
	}
	a.Daemon.Kill()
	// The TUN device belonged to the killed process: the kernel removed it.
	if _, err := m.Lab.Exec(a.NS, "ip", "link", "show", a.Iface); err == nil {
		t.Fatal("the killed agent's interface is still there")
	}
	start := time.Now()
	a = m.RestartDaemon(a)
	// No `up`: the daemon resumes the profile that was connected.
	waitStatus(t, m, a, "Connected", 20*time.Second)
	after := m.Status(a)
	if after.PublicKey != before.PublicKey || after.NetbirdIP != before.NetbirdIP {
		t.Fatalf("identity changed across SIGKILL: %s %s -> %s %s", before.PublicKey, before.NetbirdIP, after.PublicKey, after.NetbirdIP)
	}
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatal("a cannot reach b after its restart")
	}
	t.Logf("killed agent back and reaching its peer %v after its restart", time.Since(start).Round(time.Millisecond))
	if out, _ := m.Admin("peers", "list"); strings.Count(strings.TrimSpace(out), "\n") != 2 {
		t.Fatalf("duplicate peers after the restart:\n%s", out)
	}
}

// TestSignalRestart runs management and signal as separate processes:
// while signal is down the established tunnel keeps passing traffic; a new
// peer cannot connect; when signal returns it connects without help.
func TestSignalRestart(t *testing.T) {
	m := NewMesh(t) // its embedded STUN serves the separate management
	pub := m.Lab.NS("pub")
	sigAddr := netlab.PubAddr + ":10000"
	startSignal := func() *proctest.Proc {
		p := proctest.StartCmd(t, m.Lab.Cmd(pub, proctest.Binary(t, "netbird-signal"), "--listen", sigAddr), nil)
		p.Wait(t, regexp.MustCompile(`signal gRPC on`), 10*time.Second)
		return p
	}
	sig := startSignal()
	dir := t.TempDir()
	mg := proctest.StartCmd(t, m.Lab.Cmd(pub, proctest.Binary(t, "netbird-mgmt"), "--datadir", dir, "--listen", netlab.PubAddr+":33074",
		"--signal", sigAddr, "--stun", "stun:"+netlab.PubAddr+":3478"), nil)
	mg.Wait(t, regexp.MustCompile(`setup-keys create`), 20*time.Second)
	out, err := proctest.Run(t, "netbird-mgmt", "admin", "--datadir", dir, "setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("create key: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	key, url := lines[len(lines)-1], "http://"+netlab.PubAddr+":33074"

	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	for _, x := range []*Agent{a, b} {
		if out, err := m.UpAt(x, url, key); err != nil || !strings.Contains(out, "Connected") {
			t.Fatalf("%s up: %v\n%s", x.Name, err, out)
		}
	}
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatal("a cannot reach b")
	}

	sig.Stop()
	down := time.Now()
	for time.Since(down) < 6*time.Second {
		if !m.Ping(a, ipB) {
			t.Fatalf("the tunnel dropped %v after signal went down", time.Since(down).Round(time.Millisecond))
		}
		time.Sleep(300 * time.Millisecond)
	}
	c := m.Agent("c", netlab.Home)
	if out, err := m.UpAt(c, url, key); err != nil || !strings.Contains(out, "Connected") {
		t.Fatalf("c up while signal is down: %v\n%s", err, out)
	}
	if m.Ping(c, ipA) {
		t.Fatal("c reached a without signal (no relay is configured)")
	}

	sig = startSignal()
	back := time.Now()
	_, ok := m.WaitPing(c, ipA, 45*time.Second)
	if !ok {
		t.Fatal("c did not reach a within 45 s of signal's return")
	}
	t.Logf("signal back: new peer connected after %v", time.Since(back).Round(time.Millisecond))
	if !m.Ping(a, ipB) {
		t.Fatal("the a-b tunnel is gone after signal's return")
	}
}
