package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// TestSwitchServerLive: an agent joined to management M1 switches to M2
// in its running daemon (same PID) and is then reachable only by M2's
// peers, with no address or route of M1's network left on its interface;
// it switches back, runs a second profile with its own key, and refuses a
// wrong URL or a server whose identity changed without touching the
// working session.
func TestSwitchServerLive(t *testing.T) {
	m := NewMesh(t)
	m2 := m.ExtraServer(33090, 3479)
	p1, p2, x := m.Agent("p1", netlab.Home), m.Agent("p2", netlab.Home), m.Agent("x", netlab.Home)
	m.Up(p1)
	if out, err := m.UpAt(p2, m2.URL, m2.Key); err != nil {
		t.Fatalf("p2 up on M2: %v\n%s", err, out)
	}
	ip1, ip2 := IPOf(m.Status(p1)), IPOf(m.Status(p2))
	m.Up(x)
	pid := x.Daemon.Cmd.Process.Pid
	ipX1 := IPOf(m.Status(x))
	mustPing := func(from *Agent, ip, what string) {
		t.Helper()
		if _, ok := m.WaitPing(from, ip, 15*time.Second); !ok {
			t.Fatalf("%s: %s cannot reach %s", what, from.Name, ip)
		}
	}
	mustNotPing := func(from *Agent, ip, what string) {
		t.Helper()
		if m.Ping(from, ip) {
			t.Fatalf("%s: %s still reaches %s", what, from.Name, ip)
		}
	}
	mustPing(x, ip1, "on M1")

	// A wrong URL and an unreachable server leave the session on M1.
	for _, bad := range []string{"ftp://nowhere", "http://" + netlab.PubAddr + ":1"} {
		if out, err := m.UpAt(x, bad, ""); err == nil {
			t.Fatalf("up -m %s succeeded:\n%s", bad, out)
		}
	}
	if st := m.Status(x); !strings.Contains(st.Management.URL, ":33073") || !st.Management.Connected {
		t.Fatalf("a failed switch changed the session: %+v", st.Management)
	}
	mustPing(x, ip1, "after refused switches")

	// Switch to M2 live.
	if out, err := m.UpAt(x, m2.URL, m2.Key); err != nil || !strings.Contains(out, "Connected") {
		t.Fatalf("switch to M2: %v\n%s", err, out)
	}
	ipX2 := IPOf(m.Status(x))
	mustPing(x, ip2, "on M2")
	mustPing(p2, ipX2, "on M2")
	mustNotPing(x, ip1, "on M2")
	mustNotPing(p1, ipX1, "on M2")
	checkAddrs(t, m, x, ipX2)

	// And back to M1: still registered there, no setup key needed.
	if out, err := m.UpAt(x, "http://"+netlab.PubAddr+":33073", ""); err != nil {
		t.Fatalf("switch back to M1: %v\n%s", err, out)
	}
	if got := IPOf(m.Status(x)); got != ipX1 {
		t.Fatalf("back on M1 with address %s, was %s", got, ipX1)
	}
	mustPing(x, ip1, "back on M1")
	mustPing(p1, ipX1, "back on M1")
	mustNotPing(x, ip2, "back on M1")
	checkAddrs(t, m, x, ipX1)

	// A second profile: its own key, joined to M2, selected live.
	if out, err := m.CLI(x, "profile", "add", "work"); err != nil {
		t.Fatalf("profile add: %v\n%s", err, out)
	}
	keyDefault := m.Status(x).PublicKey
	if out, err := m.UpAt(x, m2.URL, m2.Key, "--profile", "work"); err != nil {
		t.Fatalf("up --profile work: %v\n%s", err, out)
	}
	st := m.Status(x)
	if st.ProfileName != "work" || st.PublicKey == keyDefault {
		t.Fatalf("profile work: name %q, key %s (default's %s)", st.ProfileName, st.PublicKey, keyDefault)
	}
	mustPing(x, ip2, "profile work")
	if out, err := m.CLI(x, "profile", "list"); err != nil || !strings.Contains(out, "* work") || !strings.Contains(out, m2.URL) {
		t.Fatalf("profile list: %v\n%s", err, out)
	}
	if out, err := m.CLI(x, "profile", "select", "default"); err != nil {
		t.Fatalf("profile select default: %v\n%s", err, out)
	}
	if st := m.Status(x); st.ProfileName != "default" || st.PublicKey != keyDefault {
		t.Fatalf("after select default: %+v", st)
	}
	mustPing(x, ip1, "profile default again")

	// M2 reinstalled (new identity): switching to it is refused, and the
	// session stays on M1.
	m2.Proc.Stop()
	m2.DataDir = t.TempDir()
	m.RestartExtra(m2)
	out, err := m.CLI(x, "profile", "select", "work")
	if err == nil || !strings.Contains(out, "another identity") {
		t.Fatalf("switch to a server with a new identity: %v\n%s", err, out)
	}
	if st := m.Status(x); st.ProfileName != "default" || !strings.Contains(st.Management.URL, ":33073") {
		t.Fatalf("a refused switch changed the session: profile %q, %+v", st.ProfileName, st.Management)
	}
	mustPing(x, ip1, "after the refused identity")

	if out, err := m.CLI(x, "profile", "remove", "work"); err != nil {
		t.Fatalf("profile remove: %v\n%s", err, out)
	}
	if x.Daemon.Cmd.Process.Pid != pid {
		t.Fatal("the daemon was restarted")
	}
	select {
	case <-x.Daemon.Exited():
		t.Fatal("the daemon exited during the switches")
	default:
	}
}

// checkAddrs: the interface carries exactly the current overlay address,
// and only its network is routed to it.
func checkAddrs(t *testing.T, m *Mesh, a *Agent, ip string) {
	t.Helper()
	out, err := m.Lab.Exec(a.NS, "ip", "-4", "-o", "addr", "show", "dev", a.Iface)
	if err != nil {
		t.Fatalf("ip addr: %v %s", err, out)
	}
	if n := strings.Count(out, " inet "); n != 1 || !strings.Contains(out, " inet "+ip+"/") {
		t.Fatalf("addresses on %s after the switch (want only %s):\n%s", a.Iface, ip, out)
	}
	routes, _ := m.Lab.Exec(a.NS, "ip", "-4", "route", "show", "dev", a.Iface)
	if strings.Count(strings.TrimSpace(routes), "\n") != 0 {
		t.Fatalf("routes on %s after the switch:\n%s", a.Iface, routes)
	}
}
