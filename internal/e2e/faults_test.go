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

// split is management, signal and (optionally) a relay as separate
// processes on the public segment, using the mesh server's STUN.
type split struct {
	m          *Mesh
	sig, relay *proctest.Proc
	url, key   string
	relayArgs  []string
}

const (
	splitSignal = netlab.PubAddr + ":10000"
	splitRelay  = netlab.PubAddr + ":34000"
)

func (s *split) startSignal() {
	t := s.m.t
	s.sig = proctest.StartCmd(t, s.m.Lab.Cmd(s.m.Lab.NS("pub"), proctest.Binary(t, "netbird-signal"), "--insecure-listen", splitSignal), nil)
	s.sig.Wait(t, regexp.MustCompile(`signal gRPC on`), 10*time.Second)
}

func (s *split) startRelay() {
	t := s.m.t
	s.relay = proctest.StartCmd(t, s.m.Lab.Cmd(s.m.Lab.NS("pub"), append([]string{proctest.Binary(t, "netbird-relay")}, s.relayArgs...)...), nil)
	s.relay.Wait(t, regexp.MustCompile(`listening on`), 10*time.Second)
}

func newSplit(m *Mesh, withRelay bool) *split {
	t := m.t
	s := &split{m: m, url: "http://" + netlab.PubAddr + ":33074"}
	s.startSignal()
	args := []string{"--insecure-listen", netlab.PubAddr + ":33074", "--signal", splitSignal, "--stun", "stun:" + netlab.PubAddr + ":3478"}
	if withRelay {
		s.relayArgs = []string{"-l", splitRelay, "-e", "rel://" + splitRelay, "-s", "split-relay-secret"}
		s.startRelay()
		args = append(args, "--relay", "rel://"+splitRelay, "--relay-secret", "split-relay-secret")
	}
	dir := t.TempDir()
	mg := proctest.StartCmd(t, m.Lab.Cmd(m.Lab.NS("pub"), append([]string{proctest.Binary(t, "netbird-mgmt"), "--datadir", dir}, args...)...), nil)
	mg.Wait(t, regexp.MustCompile(`setup-keys create`), 20*time.Second)
	out, err := proctest.Run(t, "netbird-mgmt", "admin", "--datadir", dir, "setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("create key: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.key = lines[len(lines)-1]
	return s
}

func (s *split) up(a *Agent) {
	if out, err := s.m.UpAt(a, s.url, s.key); err != nil || !strings.Contains(out, "Connected") {
		s.m.t.Fatalf("%s up: %v\n%s", a.Name, err, out)
	}
}

// keepsPinging fails the test if from stops reaching ip within d: two
// pings in a row unanswered (each waits a second; one alone can be lost
// to a loaded machine).
func keepsPinging(t *testing.T, m *Mesh, from *Agent, ip string, d time.Duration, what string) {
	t.Helper()
	missed := 0
	for start := time.Now(); time.Since(start) < d; time.Sleep(300 * time.Millisecond) {
		if m.Ping(from, ip) {
			missed = 0
			continue
		}
		if missed++; missed == 2 {
			t.Fatalf("%s: the tunnel dropped %v in", what, time.Since(start).Round(time.Millisecond))
		}
		t.Logf("%s: one ping unanswered %v in", what, time.Since(start).Round(time.Millisecond))
	}
}

// TestSignalRestart runs management and signal as separate processes:
// while signal is down the established tunnel keeps passing traffic; a new
// peer cannot connect; when signal returns it connects without help.
func TestSignalRestart(t *testing.T) {
	m := NewMesh(t) // its embedded STUN serves the separate management
	sp := newSplit(m, false)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	sp.up(a)
	sp.up(b)
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatal("a cannot reach b")
	}

	sp.sig.Stop()
	keepsPinging(t, m, a, ipB, 6*time.Second, "signal down")
	c := m.Agent("c", netlab.Home)
	sp.up(c)
	if m.Ping(c, ipA) {
		t.Fatal("c reached a without signal (no relay is configured)")
	}

	sp.startSignal()
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

// TestRelayRestart: with the relay (our TURN) down, a direct pair keeps
// passing traffic and a symmetric-NAT peer, which only the relay
// connects, loses its path; when the relay returns the relayed pair
// re-forms by itself.
func TestRelayRestart(t *testing.T) {
	m := NewMesh(t)
	sp := newSplit(m, true)
	a, b, s := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home), m.Agent("s", netlab.Symmetric)
	sp.up(a)
	sp.up(b)
	sp.up(s)
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatal("a cannot reach b")
	}
	if _, ok := m.WaitPing(s, ipA, 20*time.Second); !ok {
		t.Fatal("the symmetric-NAT peer cannot reach a through the relay")
	}
	if got := m.ConnType(s, ipA); got != "Relayed" {
		t.Fatalf("s-a is %s, want Relayed", got)
	}
	// a-b must be direct before the relay goes, or the test proves nothing.
	deadline := time.Now().Add(30 * time.Second)
	for m.ConnType(a, ipB) != "P2P" {
		if time.Now().After(deadline) {
			t.Fatalf("a-b is %s, want P2P", m.ConnType(a, ipB))
		}
		time.Sleep(300 * time.Millisecond)
	}

	sp.relay.Stop()
	keepsPinging(t, m, a, ipB, 6*time.Second, "relay down, P2P pair")
	lost := false
	for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(300 * time.Millisecond) {
		if !m.Ping(s, ipA) {
			lost = true
			break
		}
	}
	if !lost {
		t.Fatal("the relayed pair kept working without the relay (it was not relayed)")
	}

	sp.startRelay()
	back := time.Now()
	if _, ok := m.WaitPing(s, ipA, 45*time.Second); !ok {
		t.Fatal("the relayed pair did not re-form within 45 s of the relay's return")
	}
	t.Logf("relay back: relayed pair re-formed after %v", time.Since(back).Round(time.Millisecond))
	keepsPinging(t, m, a, ipB, 2*time.Second, "after the relay's return")
}

// TestNetworkChange: a peer's NAT router restarts and maps it to another
// public port, then its link flaps; each time the tunnel recovers within
// 10 s without anyone touching the agent.
func TestNetworkChange(t *testing.T) {
	m := NewMesh(t)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatal("a cannot reach b")
	}
	// The direct path is what a new public port breaks (the relay rides on
	// TCP to the server): wait for it.
	deadline := time.Now().Add(20 * time.Second)
	for m.ConnType(a, ipB) != "P2P" || m.ConnType(b, ipA) != "P2P" {
		if time.Now().After(deadline) {
			t.Fatal("a and b never went P2P")
		}
		time.Sleep(100 * time.Millisecond)
	}
	router := m.Lab.NS("ar")
	run := func(ns string, args ...string) {
		t.Helper()
		if out, err := m.Lab.Exec(ns, args...); err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
	}
	// The router "restarts": new mappings on other ports, old state gone.
	run(router, "iptables", "-t", "nat", "-I", "POSTROUTING", "1", "-o", "wan", "-p", "udp", "-j", "MASQUERADE", "--to-ports", "41000-41999")
	run(router, "conntrack", "-F")
	took, ok := m.WaitPing(a, ipB, 10*time.Second)
	if !ok {
		t.Fatal("the tunnel did not recover within 10 s of the NAT changing a's public port")
	}
	t.Logf("NAT port change: recovered after %v", took.Round(time.Millisecond))
	// The change took: a's UDP now leaves from the new port range.
	var out string
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(200 * time.Millisecond) {
		if out, _ = m.Lab.Exec(router, "conntrack", "-L", "-p", "udp"); strings.Contains(out, "dport=41") {
			break
		}
	}
	if !strings.Contains(out, "dport=41") {
		t.Fatalf("the router did not map a to a new port (41000-41999):\n%s", out)
	}

	// The link flaps for two seconds (the default route goes with it).
	run(a.NS, "ip", "link", "set", "eth0", "down")
	time.Sleep(2 * time.Second)
	run(a.NS, "ip", "link", "set", "eth0", "up")
	run(a.NS, "ip", "route", "replace", "default", "via", "10.200.1.1")
	took, ok = m.WaitPing(a, ipB, 10*time.Second)
	if !ok {
		t.Fatal("the tunnel did not recover within 10 s of a link flap")
	}
	t.Logf("link flap: recovered after %v", took.Round(time.Millisecond))
}

// TestManagementKilled: management dies with SIGKILL; the direct tunnel
// keeps passing traffic, the agents resync within 5 s of its return, and
// nothing is duplicated or readdressed.
func TestManagementKilled(t *testing.T) {
	m := NewMesh(t)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	stA, stB := m.Status(a), m.Status(b)
	ipA, ipB := IPOf(stA), IPOf(stB)
	deadline := time.Now().Add(20 * time.Second)
	for m.ConnType(a, ipB) != "P2P" || m.ConnType(b, ipA) != "P2P" {
		if time.Now().After(deadline) {
			t.Fatal("a and b never went P2P")
		}
		time.Sleep(100 * time.Millisecond)
	}
	m.Server.Kill()
	keepsPinging(t, m, a, ipB, 3*time.Second, "management killed")
	m.StartServer()
	back := time.Now()
	for _, x := range []*Agent{a, b} {
		for !m.Status(x).Management.Connected {
			if time.Since(back) > 5*time.Second {
				t.Fatalf("%s did not resync within 5 s of management's return", x.Name)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.Logf("agents resynced %v after management's return", time.Since(back).Round(time.Millisecond))
	if got := m.Status(a); got.NetbirdIP != stA.NetbirdIP || got.PublicKey != stA.PublicKey {
		t.Fatalf("a changed: %s -> %s", stA.NetbirdIP, got.NetbirdIP)
	}
	if out, _ := m.Admin("peers", "list"); strings.Count(strings.TrimSpace(out), "\n") != 2 {
		t.Fatalf("peers after the crash:\n%s", out)
	}
	keepsPinging(t, m, a, ipB, time.Second, "after management's return")
}
