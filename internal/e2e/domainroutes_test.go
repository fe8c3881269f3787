package e2e

import (
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// privateDNS is a name server on the LAN behind a routing peer: it alone
// knows the company's private names; other names get NXDOMAIN. Queries
// counts what it got.
type privateDNS struct {
	Queries atomic.Int64
}

// servePrivateDNS starts a privateDNS on addr:53 (UDP and TCP) in ns,
// answering names with the addresses names maps them to.
func servePrivateDNS(t *testing.T, ns string, addr netip.Addr, names map[string]netip.Addr) *privateDNS {
	t.Helper()
	p := &privateDNS{}
	var pc net.PacketConn
	var ln net.Listener
	if err := netlab.Do(ns, func() (err error) {
		if pc, err = net.ListenPacket("udp4", addr.String()+":53"); err != nil {
			return err
		}
		ln, err = net.Listen("tcp4", addr.String()+":53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		p.Queries.Add(1)
		r := new(dns.Msg)
		r.SetReply(q)
		r.Authoritative = true
		if len(q.Question) != 1 {
			r.Rcode = dns.RcodeFormatError
			_ = w.WriteMsg(r)
			return
		}
		qn := strings.TrimSuffix(strings.ToLower(q.Question[0].Name), ".")
		ip, ok := names[qn]
		switch {
		case !ok:
			r.Rcode = dns.RcodeNameError
		case q.Question[0].Qtype == dns.TypeA:
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
				A: ip.AsSlice()})
		}
		_ = w.WriteMsg(r)
	})
	srvs := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
	done := make(chan struct{}, len(srvs))
	for _, s := range srvs {
		go func() { _ = s.ActivateAndServe(); done <- struct{}{} }()
	}
	t.Cleanup(func() {
		for _, s := range srvs {
			_ = s.Shutdown()
		}
		for range srvs {
			<-done
		}
	})
	return p
}

// TestDomainResourcesOnRoutingPeer: the LAN behind routing peer r has a
// name server only r can ask. With routing-peer DNS resolution on, peer a
// asks its own resolver for a domain resource's names (an exact name and
// one under a wildcard resource): the question goes through the tunnel to
// r's DNS forwarder, which resolves it on the LAN, lets the answered
// address through its route firewall, and a reaches the LAN host through
// r. Names of no resource are refused by r's forwarder (a's resolver
// answers them from its own upstreams, which do not know the private
// names). With the setting off, a resolves the names itself and gets
// nothing: the private names never reach it but through r.
func TestDomainResourcesOnRoutingPeer(t *testing.T) { testDomainResources(t, nil) }

// TestDomainResourcesNftables is TestDomainResourcesOnRoutingPeer with the
// agents' nftables firewall: the forwarder's port and the learned
// addresses go into r's nftables rules.
func TestDomainResourcesNftables(t *testing.T) {
	testDomainResources(t, []string{"NB_FIREWALL=nftables"})
}

func testDomainResources(t *testing.T, env []string) {
	m := NewMesh(t)
	m.AgentEnv = append(m.AgentEnv, env...)
	admin := m.adminOf(t)
	a, r := m.Agent("a", netlab.Home), m.Agent("r", netlab.Home)
	lanNS, lan, _ := m.Lab.LAN("lan", r.NS)
	host := lan.Addr()
	svc := host.Next() // a second LAN address, for the wildcard's name
	if out, err := m.Lab.Exec(lanNS, "ip", "addr", "add", netip.PrefixFrom(svc, 24).String(), "dev", "br0"); err != nil {
		t.Fatalf("add %s: %v\n%s", svc, err, out)
	}
	whoami(t, lanNS, host.String(), 8080)
	whoami(t, lanNS, svc.String(), 8080)
	private := servePrivateDNS(t, lanNS, host, map[string]netip.Addr{"app.corp.test": host, "db.svc.corp.test": svc, "web.svc.corp.test": svc})
	// Only r's host resolver knows the LAN's name server.
	if err := os.WriteFile(filepath.Join("/etc/netns", r.NS, "resolv.conf"), []byte("nameserver "+host.String()+"\noptions timeout:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Up(a)
	m.Up(r)
	if len(env) > 0 && !hasTable(t, r.NS, "wiremesh-"+r.Iface) {
		t.Fatal("NB_FIREWALL=nftables: no nftables table for r's interface")
	}
	ipA := IPOf(m.Status(a))
	setAccountSetting(t, admin, "routing_peer_dns_resolution_enabled", true)

	// Before any resource: a's resolver knows nothing of the private names.
	if d := m.dig(a, ipA, "app.corp.test", "A"); len(d.Answers) != 0 {
		t.Fatalf("a resolves app.corp.test without any resource: %+v", d)
	}

	all := idOf(t, admin, "/api/groups", "All")
	office := admin.call("POST", "/api/groups", map[string]any{"name": "office", "peers": []string{}}, 200)["id"].(string)
	netw := admin.call("POST", "/api/networks", map[string]any{"name": "corp", "description": "private names"}, 200)["id"].(string)
	for _, res := range []string{"app.corp.test", "*.svc.corp.test"} {
		admin.call("POST", "/api/networks/"+netw+"/resources", map[string]any{"name": res, "address": res, "enabled": true, "groups": []string{office}}, 200)
	}
	admin.call("POST", "/api/networks/"+netw+"/routers", map[string]any{"peer": idOf(t, admin, "/api/peers", "r"), "metric": 9999, "masquerade": true, "enabled": true}, 200)
	admin.call("POST", "/api/policies", map[string]any{"name": "corp web", "enabled": true, "rules": []map[string]any{{
		"name": "web", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"8080"},
		"sources": []string{all}, "destinations": []string{office}}}}, 200)

	for _, c := range []struct {
		name string
		want netip.Addr
	}{{"app.corp.test", host}, {"db.svc.corp.test", svc}, {"web.svc.corp.test", svc}} {
		if d, _, ok := m.waitDig(a, ipA, c.name, "A", 20*time.Second, func(d digAnswer) bool { return d.is(c.want.String()) }); !ok {
			t.Fatalf("%s at a's resolver: %+v, want %s\n%s\n%s", c.name, d, c.want, m.debugRoutes(a), m.debugRoutes(r))
		}
		// The answer came with the route: a reaches the LAN host at once.
		var err error
		var who string
		for range 10 {
			if who, err = askWho(a, c.want.String(), 8080); err == nil {
				break
			}
			time.Sleep(300 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("a cannot reach %s (%s) through r: %v\n%s\n%s", c.name, c.want, err, m.debugRoutes(a), m.debugRoutes(r))
		}
		if !strings.HasPrefix(who, "10.210.") {
			t.Errorf("%s: the LAN host saw %s, want r's LAN address (masquerade)", c.name, who)
		}
	}
	// r's forwarder answers only the resources' names: asked directly, it
	// refuses others (a's resolver would send them to its own upstreams).
	ipR := IPOf(m.Status(r))
	if d := m.digPort(a, ipR, 22054, "www.corp.test"); d.Rcode != "REFUSED" {
		t.Errorf("r's forwarder on a name of no resource: %+v, want REFUSED", d)
	}
	// Only the map's forwarder port: 5353 (mDNS, held by avahi on many
	// hosts) is left alone while no peer of the account is older than
	// 0.59.
	if d := m.digPort(a, ipR, 5353, "app.corp.test"); d.Rcode != "" || len(d.Answers) > 0 {
		t.Errorf("r's forwarder answers on the legacy port 5353 the map does not name: %+v", d)
	}
	// A name the wildcard covers but the LAN does not know: its NXDOMAIN
	// comes through r.
	if d := m.dig(a, ipA, "nosuch.svc.corp.test", "A"); d.Rcode != "NXDOMAIN" {
		t.Errorf("unknown name under the wildcard: %+v, want NXDOMAIN", d)
	}
	if private.Queries.Load() == 0 {
		t.Error("the LAN name server was never asked")
	}

	// Off: a resolves the names itself, and cannot; what r's forwarder
	// answered is no longer routed.
	setAccountSetting(t, admin, "routing_peer_dns_resolution_enabled", false)
	if d, _, ok := m.waitDig(a, ipA, "db.svc.corp.test", "A", 10*time.Second, func(d digAnswer) bool { return len(d.Answers) == 0 && d.Rcode != "" }); !ok {
		t.Fatalf("with routing-peer DNS off a still gets the private name: %+v", d)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := askWho(a, svc.String(), 8080); err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("with routing-peer DNS off a still reaches %s through r", svc)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// digPort asks server:port for name's A records from a's namespace.
func (m *Mesh) digPort(a *Agent, server string, port int, name string) digAnswer {
	out, _ := m.Lab.Exec(a.NS, "dig", "+time=2", "+tries=1", "+noall", "+comments", "+answer", "-p", strconv.Itoa(port), "@"+server, name, "A")
	return parseDig(out)
}

// TestDomainResourceFailover: a domain resource routed by r1 and r2 (a
// peer group), resolved on the routing peers. a resolves the name through
// the router it uses; when that router goes down, a's route to the
// answered address moves to the other one within 5 s, and a asks the new
// router about the name by itself, so that the new router's firewall lets
// a through without a's host asking again.
func TestDomainResourceFailover(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a := m.Agent("a", netlab.Home)
	r1, r2 := m.Agent("r1", netlab.Home), m.Agent("r2", netlab.Home)
	lanNS, lan, gws := m.Lab.LAN("lan", r1.NS, r2.NS)
	host := lan.Addr()
	whoami(t, lanNS, host.String(), 8080)
	servePrivateDNS(t, lanNS, host, map[string]netip.Addr{"app.corp.test": host})
	for _, r := range []*Agent{r1, r2} {
		if err := os.WriteFile(filepath.Join("/etc/netns", r.NS, "resolv.conf"), []byte("nameserver "+host.String()+"\noptions timeout:1\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, ag := range []*Agent{a, r1, r2} {
		m.Up(ag)
	}
	ipA := IPOf(m.Status(a))
	setAccountSetting(t, admin, "routing_peer_dns_resolution_enabled", true)
	all := idOf(t, admin, "/api/groups", "All")
	office := admin.call("POST", "/api/groups", map[string]any{"name": "office", "peers": []string{}}, 200)["id"].(string)
	routers := admin.call("POST", "/api/groups", map[string]any{"name": "routers",
		"peers": []string{idOf(t, admin, "/api/peers", "r1"), idOf(t, admin, "/api/peers", "r2")}}, 200)["id"].(string)
	netw := admin.call("POST", "/api/networks", map[string]any{"name": "corp", "description": ""}, 200)["id"].(string)
	admin.call("POST", "/api/networks/"+netw+"/resources", map[string]any{"name": "app", "address": "app.corp.test", "enabled": true, "groups": []string{office}}, 200)
	admin.call("POST", "/api/networks/"+netw+"/routers", map[string]any{"peer_groups": []string{routers}, "metric": 9999, "masquerade": true, "enabled": true}, 200)
	admin.call("POST", "/api/policies", map[string]any{"name": "corp web", "enabled": true, "rules": []map[string]any{{
		"name": "web", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"8080"},
		"sources": []string{all}, "destinations": []string{office}}}}, 200)

	if d, _, ok := m.waitDig(a, ipA, "app.corp.test", "A", 20*time.Second, func(d digAnswer) bool { return d.is(host.String()) }); !ok {
		t.Fatalf("app.corp.test at a's resolver: %+v\n%s", d, m.debugRoutes(a))
	}
	first := ""
	for range 20 {
		if got, err := askWho(a, host.String(), 8080); err == nil {
			first = got
			break
		}
		time.Sleep(300 * time.Millisecond)
	}
	if first == "" {
		t.Fatalf("a cannot reach app.corp.test:\n%s", m.debugRoutes(a))
	}
	chosen, otherGW := r1, gws[1]
	if first == gws[1].String() {
		chosen, otherGW = r2, gws[0]
	}
	t.Logf("a routes through %s", chosen.Name)
	if out, err := m.CLI(chosen, "down"); err != nil {
		t.Fatalf("%s down: %v\n%s", chosen.Name, err, out)
	}
	stopped := time.Now()
	for {
		got, err := askWho(a, host.String(), 8080)
		if err == nil && got == otherGW.String() {
			t.Logf("a reaches app.corp.test through the other router %v after %s went down", time.Since(stopped).Round(time.Millisecond), chosen.Name)
			return
		}
		if time.Since(stopped) > 5*time.Second {
			t.Fatalf("no failover within 5 s of %s going down (last: %q, %v):\n%s", chosen.Name, got, err, m.debugRoutes(a))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// TestOfficialClientDomainResource: an official NetBird client reaches a
// domain resource through our routing peer, its resolver asking our DNS
// forwarder (at the port our management sends) for the private name.
func TestOfficialClientDomainResource(t *testing.T) {
	bin := officialClient(t)
	m := NewMesh(t)
	admin := m.adminOf(t)
	r := m.Agent("r", netlab.Home)
	o := m.AgentOf(bin, "o", netlab.Home)
	lanNS, lan, gws := m.Lab.LAN("lan", r.NS)
	host := lan.Addr()
	whoami(t, lanNS, host.String(), 8080)
	servePrivateDNS(t, lanNS, host, map[string]netip.Addr{"db.svc.corp.test": host})
	if err := os.WriteFile(filepath.Join("/etc/netns", r.NS, "resolv.conf"), []byte("nameserver "+host.String()+"\noptions timeout:1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m.Up(r)
	if out, err := m.CLI(o, "up", "-m", "http://"+netlab.PubAddr+":"+mgmtPort, "-k", m.Key, "-n", o.Name, "--interface-name", o.Iface); err != nil {
		t.Fatalf("official up: %v\n%s\n%s", err, out, o.Daemon.Output())
	}
	setAccountSetting(t, admin, "routing_peer_dns_resolution_enabled", true)
	var routerID string
	for _, p := range getList(t, admin, "/api/peers") {
		if p["ip"] == IPOf(m.Status(r)) {
			routerID, _ = p["id"].(string)
		}
	}
	all := idOf(t, admin, "/api/groups", "All")
	office := admin.call("POST", "/api/groups", map[string]any{"name": "office", "peers": []string{}}, 200)["id"].(string)
	netw := admin.call("POST", "/api/networks", map[string]any{"name": "corp", "description": ""}, 200)["id"].(string)
	admin.call("POST", "/api/networks/"+netw+"/resources", map[string]any{"name": "svc", "address": "*.svc.corp.test", "enabled": true, "groups": []string{office}}, 200)
	admin.call("POST", "/api/networks/"+netw+"/routers", map[string]any{"peer": routerID, "metric": 9999, "masquerade": true, "enabled": true}, 200)
	admin.call("POST", "/api/policies", map[string]any{"name": "corp web", "enabled": true, "rules": []map[string]any{{
		"name": "web", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"8080"},
		"sources": []string{all}, "destinations": []string{office}}}}, 200)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Through the namespace's resolv.conf: the official client's
		// resolver sits on an address of its own choosing.
		d := m.dig(o, "", "db.svc.corp.test", "A")
		if d.is(host.String()) {
			if got, err := askWho(o, host.String(), 8080); err == nil && got == gws[0].String() {
				return
			}
		}
		if time.Now().After(deadline) {
			st, _ := m.CLI(o, "status", "-d")
			t.Fatalf("the official client cannot reach db.svc.corp.test through r (last dig %+v):\n--- official status:\n%s\n%s\n--- official log:\n%s",
				d, st, m.debugRoutes(r), tail(o.Daemon.Output()))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
