package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// The IPv6 exit node test: an exit node's 0.0.0.0/0 is mirrored by
// management as ::/0 for peers on the IPv6 overlay, and IPv6 internet
// traffic then leaves through the exit node, masqueraded.

// The IPv6 "internet" only e reaches: a documentation /64 on a link of
// e's namespace (a netlab.LAN bridge). Its host has no route back to the
// overlay: only masquerade lets it answer.
const (
	exit6Net  = "2001:db8:6::/64"
	exit6GW   = "2001:db8:6::1" // e's address on it
	exit6Host = "2001:db8:6::100"
)

// overlay6Of waits until agent a's interface has its IPv6 overlay
// address (a ULA management assigned) and returns it.
func overlay6Of(t *testing.T, m *Mesh, a *Agent, within time.Duration) netip.Addr {
	t.Helper()
	var last string
	for start := time.Now(); time.Since(start) < within; time.Sleep(200 * time.Millisecond) {
		out, err := m.Lab.Exec(a.NS, "ip", "-6", "-o", "addr", "show", "dev", a.Iface, "scope", "global")
		last = out
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(out) {
			if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is6() && p.Addr().IsPrivate() {
				return p.Addr()
			}
		}
	}
	t.Fatalf("%s has no IPv6 overlay address after %v (management assigns one to peers of the account's IPv6 groups that announce the IPv6Overlay capability):\n%s\n%s",
		a.Name, within, last, m.debugRoutes(a))
	return netip.Addr{}
}

// whoami6 is whoami over IPv6: each connection gets the address it came
// from.
func whoami6(t *testing.T, ns, ip string, port int) {
	t.Helper()
	var ln net.Listener
	if err := netlab.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp6", net.JoinHostPort(ip, fmt.Sprint(port)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_, _ = c.Write([]byte(host + "\n"))
			c.Close()
		}
	}()
}

// askWho6 connects from a over IPv6 and returns the address the server
// saw.
func askWho6(a *Agent, ip string, port int) (string, error) {
	var c net.Conn
	if err := netlab.Do(a.NS, func() error {
		var err error
		c, err = net.DialTimeout("tcp6", net.JoinHostPort(ip, fmt.Sprint(port)), 1500*time.Millisecond)
		return err
	}); err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if n == 0 {
		return "", fmt.Errorf("no answer: %w", err)
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

func ping6(m *Mesh, a *Agent, ip string) bool {
	_, err := m.Lab.Exec(a.NS, "ping", "-6", "-c", "1", "-W", "1", ip)
	return err == nil
}

// waitWho6 waits until askWho6 gives want ("" waits for a failure).
func waitWho6(t *testing.T, m *Mesh, a *Agent, want string, within time.Duration, what string, debug ...*Agent) {
	t.Helper()
	var got string
	var err error
	for start := time.Now(); time.Since(start) < within; time.Sleep(300 * time.Millisecond) {
		got, err = askWho6(a, exit6Host, 8080)
		if (want == "" && err != nil) || (want != "" && got == want) {
			return
		}
	}
	var dbg strings.Builder
	for _, d := range append([]*Agent{a}, debug...) {
		dbg.WriteString(m.debugRoutes(d))
		v6, _ := m.Lab.Exec(d.NS, "ip", "-6", "route", "show", "table", "all")
		fmt.Fprintf(&dbg, "\n--- %s ip -6 route (all tables):\n%s\n", d.Name, v6)
	}
	t.Fatalf("%s: the IPv6 internet host sees %q (%v), want %q:\n%s", what, got, err, want, dbg.String())
}

// TestExitNodeIPv6: e serves 0.0.0.0/0 with masquerade; management
// mirrors it as ::/0 for a and e, both on the IPv6 overlay. a's IPv6
// traffic (ping6 and TCP) to a host only e reaches then leaves through e,
// masqueraded (the host sees e's address), while a's management traffic
// keeps going directly; the exit node lists as one network with both
// defaults; deselecting it removes the IPv4 and the IPv6 default route,
// `up --exit-node` brings both back, both agents killed and restarted
// install nothing twice, and after `down` their routing (rules, routes,
// forwarding switches) is what it was.
func TestExitNodeIPv6(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a, e := m.Agent("a", netlab.Home), m.Agent("e", netlab.Home)
	inetNS, _, _ := m.Lab.LAN("inet6", e.NS)
	for _, c := range [][]string{
		{e.NS, "ip", "-6", "addr", "add", exit6GW + "/64", "dev", "lan0", "nodad"},
		{inetNS, "ip", "-6", "addr", "add", exit6Host + "/64", "dev", "br0", "nodad"},
	} {
		if out, err := m.Lab.Exec(c[0], c[1:]...); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c[1:], " "), err, out)
		}
	}
	// A namespace starts with forwarding off: the test sees what e turns on.
	if out, err := m.Lab.Exec(e.NS, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=0"); err != nil {
		t.Fatalf("sysctl: %v\n%s", err, out)
	}
	cleanA, cleanE := routingState(t, m, a.NS), routingState(t, m, e.NS)
	m.Up(a)
	m.Up(e)
	a6, e6 := overlay6Of(t, m, a, 20*time.Second), overlay6Of(t, m, e, 20*time.Second)
	t.Logf("a is %s, e is %s on the IPv6 overlay", a6, e6)
	whoami6(t, inetNS, exit6Host, 8080)
	if ping6(m, a, exit6Host) {
		t.Fatal("a reaches the IPv6 internet host before any exit node exists")
	}
	if got, err := askWho6(e, exit6Host, 8080); err != nil || got != exit6GW {
		t.Fatalf("e itself reaches the IPv6 internet host as %q (%v), want %s", got, err, exit6GW)
	}

	all := idOf(t, admin, "/api/groups", "All")
	admin.call("POST", "/api/routes", routeBody("exit-e", "0.0.0.0/0", idOf(t, admin, "/api/peers", "e"), []string{all}, true), 200)
	// a's router counts a's TCP packets to management.
	aRouter := a.NS + "r"
	if _, err := m.Lab.Exec(aRouter, "iptables", "-I", "FORWARD", "1", "-d", netlab.PubAddr, "-p", "tcp", "--dport", mgmtPort); err != nil {
		t.Fatal(err)
	}
	mgmtPackets := func() int {
		out, _ := m.Lab.Exec(aRouter, "iptables", "-L", "FORWARD", "1", "-v", "-x", "-n")
		var n int
		_, _ = fmt.Sscan(strings.Fields(out + " 0")[0], &n)
		return n
	}
	start := time.Now()
	waitWho6(t, m, a, exit6GW, 20*time.Second, "through the exit node", e)
	t.Logf("IPv6 internet through e %v after the route was created", time.Since(start).Round(time.Millisecond))
	if !ping6(m, a, exit6Host) {
		t.Fatal("a's ping6 to the IPv6 internet host gets no answer through e")
	}
	if out, _ := m.Lab.Exec(e.NS, "sysctl", "-n", "net.ipv6.conf.all.forwarding"); strings.TrimSpace(out) != "1" {
		t.Errorf("e's IPv6 forwarding is %q while it serves ::/0", strings.TrimSpace(out))
	}
	tb, _ := m.Lab.Exec(a.NS, "ip", "-6", "route", "show", "table", "7120")
	if !strings.Contains(tb, "default dev "+a.Iface) {
		t.Errorf("a's IPv6 table 7120 has no default route into the tunnel:\n%s", tb)
	}
	if out, err := m.CLI(a, "networks", "ls"); err != nil || !strings.Contains(out, "exit-e") || !strings.Contains(out, "::/0") || strings.Contains(out, "exit-e-v6") {
		t.Errorf("networks ls should list exit-e once with both defaults: %v\n%s", err, out)
	}

	// A change through management still reaches a, directly.
	before := mgmtPackets()
	b := m.Agent("b", netlab.Home)
	m.Up(b)
	if _, ok := m.WaitPing(a, IPOf(m.Status(b)), 20*time.Second); !ok {
		t.Fatalf("a no longer follows management with the IPv6 exit node on:\n%s", m.debugRoutes(a))
	}
	if after := mgmtPackets(); after <= before {
		t.Fatalf("a's management traffic no longer goes directly (%d packets before, %d after)", before, after)
	}

	// Deselected: both defaults go.
	if out, err := m.CLI(a, "networks", "deselect", "exit-e"); err != nil {
		t.Fatalf("networks deselect: %v\n%s", err, out)
	}
	waitWho6(t, m, a, "", 5*time.Second, "after deselecting exit-e")
	if tb, _ := m.Lab.Exec(a.NS, "ip", "route", "show", "table", "7120"); strings.Contains(tb, "default") {
		t.Errorf("a's IPv4 default route into the tunnel stays after deselecting:\n%s", tb)
	}
	if tb, _ := m.Lab.Exec(a.NS, "ip", "-6", "route", "show", "table", "7120"); strings.Contains(tb, "default") {
		t.Errorf("a's IPv6 default route stays after deselecting:\n%s", tb)
	}
	// Selected again the way NetBird's CLI does it: both come back.
	m.upWith(a, "--exit-node", "exit-e")
	waitWho6(t, m, a, exit6GW, 10*time.Second, "after up --exit-node exit-e", e)

	// SIGKILL + restart: what the killed runs left is removed and put back
	// once, not twice.
	upRulesA, upRulesE := rules(t, m, a.NS), rules(t, m, e.NS)
	a.Daemon.Kill()
	e.Daemon.Kill()
	a, e = m.RestartDaemon(a), m.RestartDaemon(e)
	waitStatus(t, m, a, "Connected", 20*time.Second)
	waitStatus(t, m, e, "Connected", 20*time.Second)
	waitWho6(t, m, a, exit6GW, 20*time.Second, "after both agents were killed and restarted", e)
	if got := rules(t, m, a.NS); got != upRulesA {
		t.Fatalf("a's rules after SIGKILL + restart:\n%s\nbefore:\n%s", got, upRulesA)
	}
	if got := rules(t, m, e.NS); got != upRulesE {
		t.Fatalf("e's rules after SIGKILL + restart:\n%s\nbefore:\n%s", got, upRulesE)
	}

	for _, ag := range []*Agent{a, b, e} {
		if out, err := m.CLI(ag, "down"); err != nil {
			t.Fatalf("%s down: %v\n%s", ag.Name, err, out)
		}
	}
	if got := routingState(t, m, a.NS); got != cleanA {
		t.Fatalf("a's routing after down:\n%s\nbefore up:\n%s", got, cleanA)
	}
	if got := routingState(t, m, e.NS); got != cleanE {
		t.Fatalf("e's routing after down:\n%s\nbefore up:\n%s", got, cleanE)
	}
}
