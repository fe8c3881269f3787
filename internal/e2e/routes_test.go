package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// The routing tests: a LAN (netlab.LAN) behind routing peers, reached by
// other peers through routes (/api/routes) or networks (/api/networks),
// and an "internet" host on the public segment reached through an exit
// node.

// routingState is everything an agent may change in its namespace's
// routing: policy rules and every table's routes (IPv4 and IPv6), and the
// forwarding switches.
func routingState(t *testing.T, m *Mesh, ns string) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{
		{"ip", "-4", "rule"}, {"ip", "-6", "rule"},
		{"ip", "-4", "route", "show", "table", "all"}, {"ip", "-6", "route", "show", "table", "all"},
		{"sysctl", "net.ipv4.ip_forward", "net.ipv6.conf.all.forwarding"},
	} {
		out, err := m.Lab.Exec(ns, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		fmt.Fprintf(&b, "$ %s\n", strings.Join(args, " "))
		for _, line := range strings.SplitAfter(out, "\n") {
			// The kernel adds a link's IPv6 link-local address by itself
			// some time after the link comes up: not the agent's doing.
			if !strings.Contains(line, "fe80:") {
				b.WriteString(line)
			}
		}
	}
	return b.String()
}

// rules is the namespace's policy routing rules.
func rules(t *testing.T, m *Mesh, ns string) string {
	t.Helper()
	v4, err1 := m.Lab.Exec(ns, "ip", "-4", "rule")
	v6, err2 := m.Lab.Exec(ns, "ip", "-6", "rule")
	if err1 != nil || err2 != nil {
		t.Fatalf("ip rule: %v %v", err1, err2)
	}
	return v4 + v6
}

// whoami serves, on ip:port in namespace ns, the address each connection
// comes from: what the LAN or internet host sees of its client.
func whoami(t *testing.T, ns, ip string, port int) {
	t.Helper()
	var ln net.Listener
	if err := netlab.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", ip, port))
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

// askWho connects from a's namespace to a whoami server and returns the
// address it saw.
func askWho(a *Agent, ip string, port int) (string, error) {
	c, err := dial(a, ip, port)
	if err != nil {
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

// waitUnreachable waits until one ping from a to ip fails.
func (m *Mesh) waitUnreachable(a *Agent, ip string, within time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < within {
		if !m.Ping(a, ip) {
			return time.Since(start), true
		}
		time.Sleep(100 * time.Millisecond)
	}
	return time.Since(start), false
}

// debugRoutes is what a failed routing test prints about an agent.
func (m *Mesh) debugRoutes(a *Agent) string {
	st, _ := m.CLI(a, "status", "-d")
	nets, _ := m.CLI(a, "networks", "ls")
	ru, _ := m.Lab.Exec(a.NS, "ip", "rule")
	rt, _ := m.Lab.Exec(a.NS, "ip", "route", "show", "table", "all")
	return fmt.Sprintf("--- %s status -d:\n%s\n--- networks ls:\n%s\n--- ip rule:\n%s\n--- routes:\n%s", a.Name, st, nets, ru, rt)
}

// routeBody is a classic route to network through one routing peer,
// distributed to groups.
func routeBody(netID, network, peer string, groups []string, masquerade bool) map[string]any {
	return map[string]any{"description": "", "network_id": netID, "enabled": true, "peer": peer, "network": network,
		"metric": 9999, "masquerade": masquerade, "groups": groups, "keep_route": false}
}

// TestRoutes: a LAN behind routing peer r is reachable from a only while
// a route to it is enabled; with masquerade the LAN host sees r's LAN
// address, without it a's overlay address (and it needs its own way
// back); the CLI shows the route; the routes and rules the agents
// installed are removed exactly on `down`, and after SIGKILL + restart
// nothing is installed twice.
func TestRoutes(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a, r := m.Agent("a", netlab.Home), m.Agent("r", netlab.Home)
	lanNS, lan, gws := m.Lab.LAN("lan", r.NS)
	cleanA, cleanR := routingState(t, m, a.NS), routingState(t, m, r.NS)
	m.Up(a)
	m.Up(r)
	host := lan.Addr().String()
	whoami(t, lanNS, host, 8080)
	if m.Ping(a, host) {
		t.Fatal("a reaches the LAN before any route exists")
	}
	all := idOf(t, admin, "/api/groups", "All")
	rt := admin.call("POST", "/api/routes", routeBody("office", lan.Masked().String(), idOf(t, admin, "/api/peers", "r"), []string{all}, true), 200)
	routeID, _ := rt["id"].(string)
	if d, ok := m.WaitPing(a, host, 15*time.Second); !ok {
		t.Fatalf("a cannot reach the LAN host through r:\n%s\n%s", m.debugRoutes(a), m.debugRoutes(r))
	} else {
		t.Logf("LAN reachable %v after the route was created", d.Round(time.Millisecond))
	}
	if got, err := askWho(a, host, 8080); err != nil || got != gws[0].String() {
		t.Fatalf("with masquerade the LAN host sees %q (%v), want r's LAN address %s", got, err, gws[0])
	}
	if out, err := m.CLI(a, "networks", "ls"); err != nil || !strings.Contains(out, "office") || !strings.Contains(out, lan.Masked().String()) {
		t.Fatalf("networks ls: %v\n%s", err, out)
	}
	if out, _ := m.CLI(a, "status", "-d"); !strings.Contains(out, lan.Masked().String()) {
		t.Fatalf("status -d does not show the route:\n%s", out)
	}

	put := func(body map[string]any) {
		t.Helper()
		admin.call("PUT", "/api/routes/"+routeID, body, 200)
	}
	off := routeBody("office", lan.Masked().String(), idOf(t, admin, "/api/peers", "r"), []string{all}, true)
	off["enabled"] = false
	put(off)
	if _, ok := m.waitUnreachable(a, host, 5*time.Second); !ok {
		t.Fatal("the LAN is still reachable 5 s after the route was disabled")
	}
	noMasq := routeBody("office", lan.Masked().String(), idOf(t, admin, "/api/peers", "r"), []string{all}, false)
	put(noMasq)
	overlay := netip.MustParsePrefix(m.Status(a).NetbirdIP).Masked()
	m.Lab.Route(lanNS, overlay, gws[0])
	if _, ok := m.WaitPing(a, host, 10*time.Second); !ok {
		t.Fatalf("without masquerade a cannot reach the LAN host:\n%s", m.debugRoutes(r))
	}
	if got, err := askWho(a, host, 8080); err != nil || got != IPOf(m.Status(a)) {
		t.Fatalf("without masquerade the LAN host sees %q (%v), want a's overlay address %s", got, err, IPOf(m.Status(a)))
	}

	// SIGKILL + restart: the daemons resume; nothing is installed twice.
	upRulesA, upRulesR := rules(t, m, a.NS), rules(t, m, r.NS)
	a.Daemon.Kill()
	r.Daemon.Kill()
	a, r = m.RestartDaemon(a), m.RestartDaemon(r)
	waitStatus(t, m, a, "Connected", 20*time.Second)
	waitStatus(t, m, r, "Connected", 20*time.Second)
	if _, ok := m.WaitPing(a, host, 20*time.Second); !ok {
		t.Fatalf("a cannot reach the LAN after both agents were killed and restarted:\n%s", m.debugRoutes(a))
	}
	if got := rules(t, m, a.NS); got != upRulesA {
		t.Fatalf("a's rules after SIGKILL + restart:\n%s\nbefore:\n%s", got, upRulesA)
	}
	if got := rules(t, m, r.NS); got != upRulesR {
		t.Fatalf("r's rules after SIGKILL + restart:\n%s\nbefore:\n%s", got, upRulesR)
	}
	for _, ag := range []*Agent{a, r} {
		if out, err := m.CLI(ag, "down"); err != nil {
			t.Fatalf("%s down: %v\n%s", ag.Name, err, out)
		}
	}
	if got := routingState(t, m, a.NS); got != cleanA {
		t.Fatalf("a's routing after down:\n%s\nbefore up:\n%s", got, cleanA)
	}
	if got := routingState(t, m, r.NS); got != cleanR {
		t.Fatalf("r's routing after down:\n%s\nbefore up:\n%s", got, cleanR)
	}
}

// TestRouteKeepsManagement: a route that covers the management server's
// own address (the whole public segment, through a routing peer) must not
// cut the client off: it stays connected and still gets changes.
func TestRouteKeepsManagement(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a, r := m.Agent("a", netlab.Home), m.Agent("r", netlab.Home)
	m.Up(a)
	m.Up(r)
	all := idOf(t, admin, "/api/groups", "All")
	admin.call("POST", "/api/routes", routeBody("public", "10.200.0.0/24", idOf(t, admin, "/api/peers", "r"), []string{all}, true), 200)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(m.debugRoutes(a), "10.200.0.0/24") {
		if time.Now().After(deadline) {
			t.Fatalf("a never installed the route:\n%s", m.debugRoutes(a))
		}
		time.Sleep(300 * time.Millisecond)
	}
	// A change made now must still reach a through management.
	b := m.Agent("b", netlab.Home)
	m.Up(b)
	ipB := IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatalf("a no longer follows management after the route covering it:\n%s", m.debugRoutes(a))
	}
	if st := m.Status(a); !st.Management.Connected || !st.Signal.Connected {
		t.Fatalf("a lost management or signal: %+v", st)
	}
}

// TestNetworkResources: the newer model. A network with the LAN as a
// subnet resource in group "office", r as its router, and a policy from
// All to "office" on tcp/8080 only: a reaches the LAN host on 8080, not on
// 8081 and not by ping; deleting the policy cuts 8080 too.
func TestNetworkResources(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a, r := m.Agent("a", netlab.Home), m.Agent("r", netlab.Home)
	lanNS, lan, _ := m.Lab.LAN("lan", r.NS)
	m.Up(a)
	m.Up(r)
	host := lan.Addr().String()
	whoami(t, lanNS, host, 8080)
	whoami(t, lanNS, host, 8081)
	all := idOf(t, admin, "/api/groups", "All")
	office := admin.call("POST", "/api/groups", map[string]any{"name": "office", "peers": []string{}}, 200)["id"].(string)
	netw := admin.call("POST", "/api/networks", map[string]any{"name": "office", "description": "the office LAN"}, 200)["id"].(string)
	admin.call("POST", "/api/networks/"+netw+"/resources", map[string]any{"name": "lan", "address": lan.Masked().String(), "enabled": true, "groups": []string{office}}, 200)
	admin.call("POST", "/api/networks/"+netw+"/routers", map[string]any{"peer": idOf(t, admin, "/api/peers", "r"), "metric": 9999, "masquerade": true, "enabled": true}, 200)
	pol := admin.call("POST", "/api/policies", map[string]any{"name": "office web", "enabled": true, "rules": []map[string]any{{
		"name": "web", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"8080"},
		"sources": []string{all}, "destinations": []string{office}}}}, 200)["id"].(string)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if _, err := askWho(a, host, 8080); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a cannot reach the resource on tcp/8080:\n%s\n%s", m.debugRoutes(a), m.debugRoutes(r))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if _, err := askWho(a, host, 8081); err == nil {
		t.Fatal("a reaches the resource on tcp/8081, which no policy allows")
	}
	if m.Ping(a, host) {
		t.Fatal("a pings the resource, which no policy allows")
	}
	admin.call("DELETE", "/api/policies/"+pol, nil, 200)
	deadline = time.Now().Add(5 * time.Second)
	for {
		if _, err := askWho(a, host, 8080); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("a still reaches the resource 5 s after its policy was deleted")
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestRoutesHA: two routing peers for one network (a peer group). a uses
// one; when that one stops, a's traffic moves to the other within 5 s
// (a TCP client that reconnects on failure resumes its transfer through
// the new router), and it does not move back when the first returns; an
// iperf3 run through the new router completes.
func TestRoutesHA(t *testing.T) { testRoutesHA(t, haDown, false) }

// TestRoutesHAKilled: as TestRoutesHA, but the chosen router's daemon is
// killed (SIGKILL: no goodbye, its connections just stop answering); a's
// traffic still moves to the other router within 5 s, and the killed one,
// restarted, does not take the route back.
func TestRoutesHAKilled(t *testing.T) { testRoutesHA(t, haKill, false) }

// TestRoutesHARelayed: as TestRoutesHAKilled with every connection on the
// relay (NB_FORCE_RELAY).
func TestRoutesHARelayed(t *testing.T) { testRoutesHA(t, haKill, true) }

// TestRoutesHACutRelayed: every connection on the relay, and the chosen
// router's network is cut (all its packets dropped, so nobody is told):
// the relay server still holds its connection, a's relayed path to it
// still looks connected, yet a's traffic moves within 5 s; when the
// network returns, no switch back.
func TestRoutesHACutRelayed(t *testing.T) { testRoutesHA(t, haCut, true) }

// How TestRoutesHA's chosen router goes away.
const (
	haDown = iota // netbird down
	haKill        // SIGKILL
	haCut         // all its packets dropped
)

func testRoutesHA(t *testing.T, how int, relayed bool) {
	m := NewMesh(t)
	if relayed {
		m.AgentEnv = append(m.AgentEnv, "NB_FORCE_RELAY=true")
	}
	admin := m.adminOf(t)
	a := m.Agent("a", netlab.Home)
	r1, r2 := m.Agent("r1", netlab.Home), m.Agent("r2", netlab.Home)
	lanNS, lan, gws := m.Lab.LAN("lan", r1.NS, r2.NS)
	for _, ag := range []*Agent{a, r1, r2} {
		m.Up(ag)
	}
	host := lan.Addr().String()
	whoami(t, lanNS, host, 8080)
	routers := admin.call("POST", "/api/groups", map[string]any{"name": "routers",
		"peers": []string{idOf(t, admin, "/api/peers", "r1"), idOf(t, admin, "/api/peers", "r2")}}, 200)["id"].(string)
	all := idOf(t, admin, "/api/groups", "All")
	body := routeBody("office", lan.Masked().String(), "", []string{all}, true)
	delete(body, "peer")
	body["peer_groups"] = []string{routers}
	admin.call("POST", "/api/routes", body, 200)
	via := func() string {
		got, err := askWho(a, host, 8080)
		if err != nil {
			return ""
		}
		return got
	}
	deadline := time.Now().Add(15 * time.Second)
	first := ""
	for first == "" {
		if first = via(); first == "" && time.Now().After(deadline) {
			t.Fatalf("a cannot reach the LAN:\n%s", m.debugRoutes(a))
		}
		time.Sleep(200 * time.Millisecond)
	}
	chosen, other := r1, r2
	if first == gws[1].String() {
		chosen, other = r2, r1
	}
	t.Logf("a routes through %s", chosen.Name)
	// A client that keeps sending through the route, reconnecting when
	// its connection breaks: it must be back within 5 s of the stop.
	switch how {
	case haKill:
		chosen.Daemon.Kill()
	case haCut:
		cutNet(t, m, chosen, "-I")
	default:
		if out, err := m.CLI(chosen, "down"); err != nil {
			t.Fatalf("%s down: %v\n%s", chosen.Name, err, out)
		}
	}
	stopped := time.Now()
	if _, ok := m.WaitPing(a, host, 5*time.Second); !ok {
		t.Fatalf("no failover within 5 s of %s going down:\n%s", chosen.Name, m.debugRoutes(a))
	}
	took := time.Since(stopped)
	if got := via(); got != gws[map[*Agent]int{r1: 1, r2: 0}[chosen]].String() {
		t.Fatalf("after %s went down the LAN host sees a as %q, want the other router", chosen.Name, got)
	}
	t.Logf("failover to %s %v after %s went down", other.Name, took.Round(time.Millisecond), chosen.Name)
	if _, err := exec.LookPath("iperf3"); err == nil {
		srv := m.Lab.Cmd(lanNS, "iperf3", "-s", "-1", "-B", host, "-p", "5201")
		if err := srv.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
		time.Sleep(300 * time.Millisecond)
		if out, err := m.Lab.Exec(a.NS, "iperf3", "-c", host, "-p", "5201", "-t", "3"); err != nil {
			t.Fatalf("iperf3 through %s: %v\n%s", other.Name, err, out)
		}
	} else if os.Getenv("WIREMESH_REQUIRE_IPERF3") != "" {
		t.Fatal("iperf3 not installed (scripts/deps.sh installs it)")
	}
	// The first router comes back: no switch back while the second works.
	switch how {
	case haKill:
		chosen = m.RestartDaemon(chosen)
		waitStatus(t, m, chosen, "Connected", 20*time.Second)
	case haCut:
		cutNet(t, m, chosen, "-D")
	default:
		m.Up(chosen)
	}
	time.Sleep(5 * time.Second)
	for i := 0; i < 5; i++ {
		if got := via(); got != gws[map[*Agent]int{r1: 1, r2: 0}[chosen]].String() {
			t.Fatalf("a switched back (or lost the route) after %s returned: LAN sees %q", chosen.Name, got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestExitNode: e serves 0.0.0.0/0. a's traffic to an "internet" host on
// the public segment then leaves through e (the host sees e's router),
// while a's management connection keeps going directly (its router's
// counter for it grows) and a stays connected; deselecting the exit node
// with the CLI sends the traffic directly again.
func TestExitNode(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a, e := m.Agent("a", netlab.Home), m.Agent("e", netlab.Home)
	netNS, netHost := m.Lab.Internet("internet")
	m.Up(a)
	m.Up(e)
	whoami(t, netNS, netHost.String(), 8080)
	direct, err := askWho(a, netHost.String(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	viaE, err := askWho(e, netHost.String(), 8080)
	if err != nil || viaE == direct {
		t.Fatalf("the internet host sees a as %s and e as %s (%v)", direct, viaE, err)
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
	deadline := time.Now().Add(15 * time.Second)
	for {
		if got, _ := askWho(a, netHost.String(), 8080); got == viaE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's internet traffic does not leave through e:\n%s", m.debugRoutes(a))
		}
		time.Sleep(300 * time.Millisecond)
	}
	before := mgmtPackets()
	// A change through management still reaches a, directly.
	b := m.Agent("b", netlab.Home)
	m.Up(b)
	if _, ok := m.WaitPing(a, IPOf(m.Status(b)), 20*time.Second); !ok {
		t.Fatalf("a no longer follows management with the exit node on:\n%s", m.debugRoutes(a))
	}
	if after := mgmtPackets(); after <= before {
		t.Fatalf("a's management traffic no longer goes directly (%d packets before, %d after)", before, after)
	}
	if out, err := m.CLI(a, "networks", "deselect", "exit-e"); err != nil {
		t.Fatalf("networks deselect: %v\n%s", err, out)
	}
	deadline = time.Now().Add(5 * time.Second)
	for {
		if got, _ := askWho(a, netHost.String(), 8080); got == direct {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's traffic still leaves through e after deselecting it:\n%s", m.debugRoutes(a))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// TestOfficialClientRoutes: an official NetBird client reaches the LAN
// through our routing peer.
func TestOfficialClientRoutes(t *testing.T) { officialRouting(t, false) }

// TestOfficialRoutingPeer: our agent reaches the LAN through an official
// NetBird client acting as the routing peer.
func TestOfficialRoutingPeer(t *testing.T) { officialRouting(t, true) }

// officialRouting runs our agent and an official NetBird client, one of
// them (the official one when officialRouter) the routing peer of a LAN,
// and waits until the other reaches the LAN host through it.
func officialRouting(t *testing.T, officialRouter bool) {
	bin := officialClient(t)
	m := NewMesh(t)
	admin := m.adminOf(t)
	ours := m.Agent("a", netlab.Home)
	o := m.AgentOf(bin, "o", netlab.Home)
	router, client := ours, o
	if officialRouter {
		router, client = o, ours
	}
	lanNS, lan, gws := m.Lab.LAN("lan", router.NS)
	m.Up(ours)
	if out, err := m.CLI(o, "up", "-m", "http://"+netlab.PubAddr+":"+mgmtPort, "-k", m.Key, "-n", o.Name, "--interface-name", o.Iface); err != nil {
		t.Fatalf("official up: %v\n%s\n%s", err, out, o.Daemon.Output())
	}
	host := lan.Addr().String()
	whoami(t, lanNS, host, 8080)
	all := idOf(t, admin, "/api/groups", "All")
	// The official client registers under the machine's host name, not
	// -n: the router is found by its address.
	var routerID string
	for _, p := range getList(t, admin, "/api/peers") {
		if p["ip"] == IPOf(m.Status(router)) {
			routerID, _ = p["id"].(string)
		}
	}
	admin.call("POST", "/api/routes", routeBody("office", lan.Masked().String(), routerID, []string{all}, true), 200)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if got, err := askWho(client, host, 8080); err == nil && got == gws[0].String() {
			return
		}
		if time.Now().After(deadline) {
			st, _ := m.CLI(o, "status", "-d")
			nets, _ := m.CLI(client, "networks", "ls")
			t.Fatalf("%s cannot reach the LAN through %s:\n--- official status:\n%s\n--- networks:\n%s\n%s", client.Name, router.Name, st, nets, m.debugRoutes(ours))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// cutNet drops (op "-I") or lets through again (op "-D") every packet of
// a's namespace, so that nobody is told it is gone.
func cutNet(t *testing.T, m *Mesh, a *Agent, op string) {
	t.Helper()
	for _, chain := range []string{"INPUT", "OUTPUT", "FORWARD"} {
		args := []string{"iptables", op, chain}
		if op == "-I" {
			args = append(args, "1")
		}
		if out, err := m.Lab.Exec(a.NS, append(args, "-j", "DROP")...); err != nil {
			t.Fatalf("iptables %s %s in %s: %v\n%s", op, chain, a.Name, err, out)
		}
	}
}

// upWith runs netbird up for a with extra flags.
func (m *Mesh) upWith(a *Agent, extra ...string) {
	m.t.Helper()
	args := append([]string{"up", "-m", "http://" + netlab.PubAddr + ":" + mgmtPort, "-k", m.Key, "-n", a.Name, "--interface-name", a.Iface}, extra...)
	if out, err := m.CLI(a, args...); err != nil || !strings.Contains(out, "Connected") {
		m.t.Fatalf("%s: netbird up %s: %v\n%s", a.Name, strings.Join(extra, " "), err, out)
	}
}

// localFlag waits until the REST peer named name reports local flag
// flag as want (the agent sends its flags with every sync).
func localFlag(t *testing.T, admin restClient, name, flag string, want bool) {
	t.Helper()
	id := idOf(t, admin, "/api/peers", name)
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := admin.call("GET", "/api/peers/"+id, nil, 200)
		fl, _ := p["local_flags"].(map[string]any)
		if got, _ := fl[flag].(bool); got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("peer %s local_flags %v, want %s=%v", name, p["local_flags"], flag, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestRouteFlags: `netbird up --disable-server-routes` makes a routing
// peer serve nothing (the LAN stays unreachable, forwarding stays off)
// until `up --disable-server-routes=false`; a client with
// --disable-client-routes lists the route but installs none; the flags
// are remembered in the profile and shown in the REST peer's
// local_flags.
func TestRouteFlags(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a, r := m.Agent("a", netlab.Home), m.Agent("r", netlab.Home)
	lanNS, lan, _ := m.Lab.LAN("lan", r.NS)
	fwdBefore, err := m.Lab.Exec(r.NS, "sysctl", "-n", "net.ipv4.ip_forward")
	if err != nil {
		t.Fatal(err)
	}
	m.Up(a)
	m.upWith(r, "--disable-server-routes")
	host := lan.Addr().String()
	all := idOf(t, admin, "/api/groups", "All")
	admin.call("POST", "/api/routes", routeBody("office", lan.Masked().String(), idOf(t, admin, "/api/peers", "r"), []string{all}, true), 200)
	localFlag(t, admin, "r", "disable_server_routes", true)
	// a takes the route (it goes into the tunnel), r drops it.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(m.debugRoutes(a), lan.Masked().String()) {
		if time.Now().After(deadline) {
			t.Fatalf("a never installed the route:\n%s", m.debugRoutes(a))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if _, ok := m.WaitPing(a, host, 4*time.Second); ok {
		t.Fatalf("the LAN is reachable through r started with --disable-server-routes:\n%s", m.debugRoutes(r))
	}
	if out, _ := m.Lab.Exec(r.NS, "sysctl", "-n", "net.ipv4.ip_forward"); out != fwdBefore {
		t.Fatalf("r changed forwarding (%q, was %q) with server routes disabled", out, fwdBefore)
	}
	// Remembered: a plain up keeps it.
	m.upWith(r)
	if _, ok := m.WaitPing(a, host, 3*time.Second); ok {
		t.Fatal("a plain netbird up forgot --disable-server-routes")
	}
	m.upWith(r, "--disable-server-routes=false")
	localFlag(t, admin, "r", "disable_server_routes", false)
	if _, ok := m.WaitPing(a, host, 20*time.Second); !ok {
		t.Fatalf("r does not serve the LAN after up --disable-server-routes=false:\n%s\n%s", m.debugRoutes(a), m.debugRoutes(r))
	}
	whoami(t, lanNS, host, 8080)

	// The client side: listed, not installed, the LAN unreachable.
	m.upWith(a, "--disable-client-routes")
	localFlag(t, admin, "a", "disable_client_routes", true)
	waitStatus(t, m, a, "Connected", 20*time.Second)
	if _, ok := m.waitUnreachable(a, host, 10*time.Second); !ok {
		t.Fatalf("a still reaches the LAN with --disable-client-routes:\n%s", m.debugRoutes(a))
	}
	if out, err := m.CLI(a, "networks", "ls"); err != nil || !strings.Contains(out, "office") {
		t.Fatalf("networks ls with client routes disabled: %v\n%s", err, out)
	}
	if out, _ := m.Lab.Exec(a.NS, "ip", "route", "show", "table", "all"); strings.Contains(out, lan.Masked().String()) {
		t.Fatalf("a installed the route with --disable-client-routes:\n%s", out)
	}
	if _, err := askWho(a, host, 8080); err == nil {
		t.Fatal("a opened a connection to the LAN with client routes disabled")
	}
	m.upWith(a, "--disable-client-routes=false")
	if _, ok := m.WaitPing(a, host, 20*time.Second); !ok {
		t.Fatalf("a does not reach the LAN after up --disable-client-routes=false:\n%s", m.debugRoutes(a))
	}
}

// TestBlockLANAccess: an exit node started with --block-lan-access
// carries a's internet traffic but drops what a sends to the exit node's
// own LAN, until a route names that LAN.
func TestBlockLANAccess(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a, e := m.Agent("a", netlab.Home), m.Agent("e", netlab.Home)
	netNS, netHost := m.Lab.Internet("internet")
	lanNS, lan, _ := m.Lab.LAN("lan", e.NS)
	m.Up(a)
	m.upWith(e, "--block-lan-access")
	localFlag(t, admin, "e", "block_lan_access", true)
	whoami(t, netNS, netHost.String(), 8080)
	host := lan.Addr().String()
	whoami(t, lanNS, host, 8080)
	viaE, err := askWho(e, netHost.String(), 8080)
	if err != nil {
		t.Fatal(err)
	}
	all := idOf(t, admin, "/api/groups", "All")
	eID := idOf(t, admin, "/api/peers", "e")
	admin.call("POST", "/api/routes", routeBody("exit-e", "0.0.0.0/0", eID, []string{all}, true), 200)
	deadline := time.Now().Add(15 * time.Second)
	for {
		if got, _ := askWho(a, netHost.String(), 8080); got == viaE {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a's internet traffic does not leave through e:\n%s", m.debugRoutes(a))
		}
		time.Sleep(300 * time.Millisecond)
	}
	if got, err := askWho(a, host, 8080); err == nil {
		t.Fatalf("a reached e's LAN (seen as %s) through an exit node with --block-lan-access", got)
	}
	admin.call("POST", "/api/routes", routeBody("office", lan.Masked().String(), eID, []string{all}, true), 200)
	if _, ok := m.WaitPing(a, host, 15*time.Second); !ok {
		t.Fatalf("a cannot reach e's LAN once a route names it:\n%s\n%s", m.debugRoutes(a), m.debugRoutes(e))
	}
}
