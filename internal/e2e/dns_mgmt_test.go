package e2e

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

// The managed-DNS tests (issue 21): what the REST API's nameserver groups,
// custom zones and DNS domain make the agents resolve, through their own
// resolver (dig at the overlay address) and through the host's resolver
// as programs use it (getent): plain resolv.conf, a real systemd-resolved,
// and the official NetBird client against our server.

// Addresses the tests' name servers answer with (TEST-NET-1: never routed).
const (
	outsideIP = "192.0.2.7"  // outside.example, from the hosts' original name server
	corp1IP   = "192.0.2.11" // any name under corp.test, from the first corp name server
	corp2IP   = "192.0.2.12" // the same from the second
	webIP     = "10.99.0.7"  // web.zone.test, a custom zone's A record
)

// TestDNSManaged: with plain resolv.conf, a resolves b's name at its
// resolver and through libc; a custom zone's record resolves; a nameserver
// group for corp.test answers names under it through its first server and,
// once that one vanishes from the network, through the second within a few
// seconds, while other names still go to the host's original name server;
// a peer rename and a new account DNS domain reach a's resolver within
// 2 s; and the host's resolv.conf is restored exactly on down, also after
// a SIGKILL and a restart.
func TestDNSManaged(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	upstream(t, m.Lab.NS("pub"), "outside.example.", outsideIP)
	ns1 := serveZone(t, m, "ns1", "corp.test", corp1IP)
	ns2 := serveZone(t, m, "ns2", "corp.test", corp2IP)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	sa, sb := m.Status(a), m.Status(b)
	ipA, ipB := IPOf(sa), IPOf(sb)
	domain := strings.TrimPrefix(sb.FQDN, "b.")
	if domain == sb.FQDN || domain == "" {
		t.Fatalf("b's fqdn %q", sb.FQDN)
	}

	// (1) b's name at a's resolver and through libc.
	if d, _, ok := m.waitDig(a, ipA, sb.FQDN, "A", 10*time.Second, func(d digAnswer) bool { return d.is(ipB) }); !ok {
		t.Fatalf("dig @%s %s: want %s, got:\n%s\n%s", ipA, sb.FQDN, ipB, d.Raw, m.debugDNS(a))
	}
	if d := m.dig(a, ipA, "nosuch."+domain, "A"); d.Rcode != "NXDOMAIN" {
		t.Errorf("a name in the peers' zone that no peer has: %q, want NXDOMAIN\n%s", d.Rcode, d.Raw)
	}
	// b is on the account's IPv6 overlay (new accounts enable it for
	// All): one AAAA, its ULA address. An IPv4-only peer's NODATA is
	// TestIPv6Overlay's (a --disable-ipv6 peer).
	if d := m.dig(a, ipA, sb.FQDN, "AAAA"); d.Rcode != "NOERROR" || len(d.Answers) != 1 || !strings.HasPrefix(d.Answers[0], "fd") {
		t.Errorf("AAAA of b: %s %v, want its IPv6 overlay (ULA) address\n%s", d.Rcode, d.Answers, d.Raw)
	}
	if got, ok := m.waitGetent(a, sb.FQDN, ipB, 10*time.Second); !ok {
		t.Fatalf("getent %s on a: %q, want %s\n%s", sb.FQDN, got, ipB, m.debugDNS(a))
	}
	if st, _ := m.CLI(a, "status", "-d"); !regexp.MustCompile(`(?m)^DNS: \S*resolv`).MatchString(st) {
		t.Errorf("status -d does not report the resolv.conf integration:\n%s", st)
	}

	// (4) A custom zone's A record.
	all := idOf(t, admin, "/api/groups", "All")
	customZone(t, admin, "zone.test", []string{all}, map[string]string{"web.zone.test": webIP})
	if d, took, ok := m.waitDig(a, ipA, "web.zone.test", "A", 10*time.Second, func(d digAnswer) bool { return d.is(webIP) }); !ok {
		t.Fatalf("custom zone record web.zone.test: want %s, got:\n%s\n%s", webIP, d.Raw, m.debugDNS(a))
	} else {
		t.Logf("custom zone record resolves %v after it was created", took.Round(time.Millisecond))
	}
	if d := m.dig(a, ipA, "nosuch.zone.test", "A"); d.Rcode != "NXDOMAIN" {
		t.Errorf("a name in the custom zone without a record: %q, want NXDOMAIN (the zone is authoritative)\n%s", d.Rcode, d.Raw)
	}
	if got, ok := m.waitGetent(a, "web.zone.test", webIP, 5*time.Second); !ok {
		t.Errorf("getent web.zone.test on a: %q, want %s", got, webIP)
	}

	// (3) Split DNS: corp.test to ns1, then ns2 when ns1 is gone.
	admin.call("POST", "/api/dns/nameservers", nsGroupBody("corp", []netip.Addr{ns1.Addr, ns2.Addr}, []string{"corp.test"}, []string{all}), 200)
	if d, took, ok := m.waitDig(a, ipA, "host.corp.test", "A", 10*time.Second, func(d digAnswer) bool { return d.is(corp1IP) }); !ok {
		t.Fatalf("host.corp.test through the first corp name server: want %s, got:\n%s\n%s", corp1IP, d.Raw, m.debugDNS(a))
	} else {
		t.Logf("split DNS works %v after the nameserver group was created", took.Round(time.Millisecond))
	}
	if got, ok := m.waitGetent(a, "other.corp.test", corp1IP, 5*time.Second); !ok {
		t.Errorf("getent other.corp.test on a: %q, want %s", got, corp1IP)
	}
	if got := m.getent(a, "outside.example"); got != outsideIP {
		t.Errorf("outside.example (not a match domain) resolved to %q, want %s from the host's original name server", got, outsideIP)
	}
	ns1.die(t, m)
	died := time.Now()
	for n := 1; ; n++ {
		// A fresh name each time: a cached answer from ns1 proves nothing.
		// A client waiting as long as glibc does by default (5 s) gets its
		// answer from the second server.
		name := fmt.Sprintf("fail%d.corp.test", n)
		d := m.digWait(a, ipA, name, "A", 5)
		took := time.Since(died)
		if d.is(corp2IP) {
			if took > 5*time.Second {
				t.Errorf("the second corp name server answered only %v after the first vanished, want within 5 s", took.Round(time.Millisecond))
			} else {
				t.Logf("the second corp name server answers %v after the first vanished", took.Round(time.Millisecond))
			}
			break
		}
		if took > 5*time.Second {
			t.Fatalf("5 s after the first corp name server vanished, %s: %s %v (want %s from the second)\n%s", name, d.Rcode, d.Answers, corp2IP, m.debugDNS(a))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if ns2.Queries.Load() == 0 {
		t.Error("the second corp name server was never asked")
	}

	// (5) A peer rename and a new DNS domain follow within 2 s.
	renamePeer(t, admin, idOf(t, admin, "/api/peers", "b"), "b2")
	renamed := time.Now()
	if d, took, ok := m.waitDig(a, ipA, "b2."+domain, "A", 2*time.Second, func(d digAnswer) bool { return d.is(ipB) }); !ok {
		t.Errorf("2 s after the rename, b2.%s: %s %v, want %s\n%s", domain, d.Rcode, d.Answers, ipB, d.Raw)
	} else {
		t.Logf("renamed peer resolves %v after the rename", took.Round(time.Millisecond))
	}
	if d, _, ok := m.waitDig(a, ipA, "b."+domain, "A", 2*time.Second-time.Since(renamed), func(d digAnswer) bool { return d.Rcode == "NXDOMAIN" }); !ok {
		t.Errorf("the old name b.%s after the rename: %s %v, want NXDOMAIN", domain, d.Rcode, d.Answers)
	}
	setAccountSetting(t, admin, "dns_domain", "mesh.test")
	if d, took, ok := m.waitDig(a, ipA, "b2.mesh.test", "A", 2*time.Second, func(d digAnswer) bool { return d.is(ipB) }); !ok {
		t.Errorf("2 s after the DNS domain became mesh.test, b2.mesh.test: %s %v, want %s\n%s", d.Rcode, d.Answers, ipB, m.debugDNS(a))
	} else {
		t.Logf("new DNS domain resolves %v after the change", took.Round(time.Millisecond))
	}
	if d, _, ok := m.waitDig(a, ipA, "b2."+domain, "A", time.Second, func(d digAnswer) bool { return d.Rcode == "NXDOMAIN" }); !ok {
		t.Errorf("the old domain's name b2.%s: %s %v, want NXDOMAIN", domain, d.Rcode, d.Answers)
	}
	if got, ok := m.waitGetent(a, "b2", ipB, 3*time.Second); !ok {
		t.Errorf("short name b2 (search domain mesh.test) on a: %q, want %s\n%s", got, ipB, m.debugDNS(a))
	}
	deadline := time.Now().Add(3 * time.Second)
	for m.Status(a).FQDN != "a.mesh.test" {
		if time.Now().After(deadline) {
			t.Errorf("a's own fqdn is %q, want a.mesh.test", m.Status(a).FQDN)
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	// DNS settings: a peer of a disabled-management group gets its host's
	// resolver back while the group is listed, and the agent's again after.
	conf := filepath.Join("/etc/netns", a.NS, "resolv.conf")
	g := admin.call("POST", "/api/groups", map[string]any{"name": "no-dns", "peers": []string{idOf(t, admin, "/api/peers", "a")}}, 200)
	admin.call("PUT", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{g["id"].(string)}}, 200)
	waitFile(t, conf, func(s string) bool { return s == netlab.ResolvConf }, 3*time.Second)
	admin.call("PUT", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{}}, 200)
	waitFile(t, conf, func(s string) bool { return strings.Contains(s, "nameserver "+ipA+"\n") }, 3*time.Second)

	// (6) resolv.conf restored exactly on down, also after SIGKILL.
	if out, err := m.CLI(a, "down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(conf); string(got) != netlab.ResolvConf {
		t.Fatalf("down left resolv.conf as:\n%s", got)
	}
	m.Up(a)
	waitFile(t, conf, func(s string) bool { return strings.Contains(s, "nameserver "+ipA+"\n") }, 10*time.Second)
	a.Daemon.Kill()
	a = m.RestartDaemon(a)
	waitStatus(t, m, a, "Connected", 20*time.Second)
	if got, ok := m.waitGetent(a, "host2.corp.test", corp2IP, 10*time.Second); !ok {
		t.Errorf("after SIGKILL + restart, host2.corp.test: %q, want %s", got, corp2IP)
	}
	if out, err := m.CLI(a, "down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(conf); string(got) != netlab.ResolvConf {
		t.Fatalf("down after SIGKILL + restart left resolv.conf as:\n%s", got)
	}
}

// resolvedStub is the resolv.conf of a host whose resolver is
// systemd-resolved (its stub-resolv.conf).
const resolvedStub = "# This is /run/systemd/resolve/stub-resolv.conf (netlab)\nnameserver 127.0.0.53\noptions edns0 trust-ad\nsearch .\n"

// TestDNSResolved: a runs a real systemd-resolved (its stub in resolv.conf,
// its private system bus reached through DBUS_SYSTEM_BUS_ADDRESS): the
// agent detects it, reports it in status -d, and sets its link's DNS
// server and routing domains (the mesh domain, the custom zone, the match
// domain; no "~." without a primary group); programs resolve peers, zone
// records, split-DNS names and outside names through resolved; resolv.conf
// is never touched; down leaves resolved exactly as it was, also after a
// SIGKILL and a restart.
func TestDNSResolved(t *testing.T) {
	bin := filepath.Join(proctest.Root(), netlab.ResolvedBin)
	if _, err := os.Stat(bin); err != nil {
		t.Skip("systemd-resolved not extracted (bash scripts/deps.sh): ", err)
	}
	for _, tool := range []string{"dbus-daemon", "unshare", "dig", "getent"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool, " missing (bash scripts/deps.sh)")
		}
	}
	m := NewMesh(t)
	admin := m.adminOf(t)
	upstream(t, m.Lab.NS("pub"), "outside.example.", outsideIP)
	ns1 := serveZone(t, m, "ns1", "corp.test", corp1IP)
	rs := m.Lab.NewResolved(bin)
	// Only a's daemon sees this resolved.
	saved := m.AgentEnv
	m.AgentEnv = append(slices.Clone(saved), rs.Env())
	a := m.Agent("a", netlab.Home)
	m.AgentEnv = saved
	b := m.Agent("b", netlab.Home)
	conf := filepath.Join("/etc/netns", a.NS, "resolv.conf")
	if err := os.WriteFile(conf, []byte(resolvedStub), 0o644); err != nil {
		t.Fatal(err)
	}
	rs.Start(a.NS, netip.MustParseAddr(netlab.PubAddr))
	if got, ok := m.waitGetent(a, "outside.example", outsideIP, 10*time.Second); !ok {
		t.Fatalf("resolved in a's namespace does not resolve through its upstream: %q\n%s", got, rs.Output())
	}
	before, err := rs.Ctl(a.NS, "status")
	if err != nil {
		t.Fatalf("resolvectl status: %v\n%s", err, before)
	}

	all := idOf(t, admin, "/api/groups", "All")
	customZone(t, admin, "zone.test", []string{all}, map[string]string{"web.zone.test": webIP})
	admin.call("POST", "/api/dns/nameservers", nsGroupBody("corp", []netip.Addr{ns1.Addr}, []string{"corp.test"}, []string{all}), 200)
	m.Up(a)
	m.Up(b)
	ipA, sb := IPOf(m.Status(a)), m.Status(b)
	ipB := IPOf(sb)
	domain := strings.TrimPrefix(sb.FQDN, "b.")

	linkSet := func() (string, string, bool) {
		dnsOut, _ := rs.Ctl(a.NS, "dns", a.Iface)
		domOut, _ := rs.Ctl(a.NS, "domain", a.Iface)
		return dnsOut, domOut, strings.Contains(dnsOut, ipA) && strings.Contains(domOut, domain)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		dnsOut, domOut, ok := linkSet()
		if ok {
			for _, want := range []string{"~corp.test", "zone.test"} {
				if !strings.Contains(domOut, want) {
					t.Errorf("a's link domains lack %s: %s", want, domOut)
				}
			}
			if strings.Contains(domOut, "~.") {
				t.Errorf("a's link routes every name (~.) without a primary group: %s", domOut)
			}
			t.Logf("resolved's link %s: %s / %s", a.Iface, strings.TrimSpace(dnsOut), strings.TrimSpace(domOut))
			break
		}
		if time.Now().After(deadline) {
			st, _ := rs.Ctl(a.NS, "status")
			t.Fatalf("resolved's link %s: DNS %q domains %q, want %s and %s\n%s\n--- resolvectl status:\n%s\n--- resolved:\n%s",
				a.Iface, dnsOut, domOut, ipA, domain, m.debugDNS(a), st, tail(rs.Output()))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if st, _ := m.CLI(a, "status", "-d"); !regexp.MustCompile(`(?m)^DNS: \S*resolved`).MatchString(st) {
		t.Errorf("status -d does not report the systemd-resolved integration:\n%s", st)
	} else {
		t.Logf("status -d: %s", regexp.MustCompile(`(?m)^DNS: .*$`).FindString(st))
	}
	for name, want := range map[string]string{sb.FQDN: ipB, "web.zone.test": webIP, "host.corp.test": corp1IP, "outside.example": outsideIP} {
		if got, ok := m.waitGetent(a, name, want, 10*time.Second); !ok {
			st, _ := rs.Ctl(a.NS, "status")
			t.Errorf("through resolved, %s: %q, want %s\n--- resolvectl status:\n%s", name, got, want, st)
		}
	}
	if d := m.dig(a, "127.0.0.53", sb.FQDN, "A"); !d.is(ipB) {
		t.Errorf("dig @127.0.0.53 %s: %s %v, want %s", sb.FQDN, d.Rcode, d.Answers, ipB)
	}
	if got, _ := os.ReadFile(conf); string(got) != resolvedStub {
		t.Errorf("the agent rewrote resolv.conf although resolved is the host's resolver:\n%s", got)
	}

	restored := func(when string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			now, _ := rs.Ctl(a.NS, "status")
			if now == before {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s, resolved is not as before up:\n%s\n--- before:\n%s", when, now, before)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if got, _ := os.ReadFile(conf); string(got) != resolvedStub {
			t.Fatalf("%s, resolv.conf is:\n%s", when, got)
		}
	}
	if out, err := m.CLI(a, "down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	restored("after down")

	m.Up(a)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, _, ok := linkSet(); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the second up did not set resolved's link\n%s", m.debugDNS(a))
		}
	}
	a.Daemon.Kill()
	m.AgentEnv = append(slices.Clone(saved), rs.Env())
	a = m.RestartDaemon(a)
	m.AgentEnv = saved
	waitStatus(t, m, a, "Connected", 20*time.Second)
	if got, ok := m.waitGetent(a, "web.zone.test", webIP, 10*time.Second); !ok {
		t.Errorf("after SIGKILL + restart, through resolved, web.zone.test: %q, want %s\n%s", got, webIP, m.debugDNS(a))
	}
	if out, err := m.CLI(a, "down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	restored("after SIGKILL, restart and down")
}

// TestDNSOfficialClient: the official NetBird client (NB_OFFICIAL_CLIENT)
// joined to our server resolves a custom zone's record and a split-DNS
// name (nameserver group for corp.test) through the host's resolver it
// manages, and outside names still through the original name server.
func TestDNSOfficialClient(t *testing.T) {
	bin := officialClient(t)
	m := NewMesh(t)
	admin := m.adminOf(t)
	upstream(t, m.Lab.NS("pub"), "outside.example.", outsideIP)
	ns1 := serveZone(t, m, "ns1", "corp.test", corp1IP)
	all := idOf(t, admin, "/api/groups", "All")
	customZone(t, admin, "zone.test", []string{all}, map[string]string{"web.zone.test": webIP})
	admin.call("POST", "/api/dns/nameservers", nsGroupBody("corp", []netip.Addr{ns1.Addr}, []string{"corp.test"}, []string{all}), 200)
	ours := m.Agent("a", netlab.Home)
	m.Up(ours)
	o := m.AgentOf(bin, "o", netlab.Home)
	if out, err := m.CLI(o, "up", "-m", "http://"+netlab.PubAddr+":"+mgmtPort, "-k", m.Key, "-n", o.Name, "--interface-name", o.Iface); err != nil {
		t.Fatalf("official up: %v\n%s\n%s", err, out, o.Daemon.Output())
	}
	sa := m.Status(ours)
	for name, want := range map[string]string{"web.zone.test": webIP, "host.corp.test": corp1IP, sa.FQDN: IPOf(sa), "outside.example": outsideIP} {
		if got, ok := m.waitGetent(o, name, want, 20*time.Second); !ok {
			rc, _ := m.Lab.Exec(o.NS, "cat", "/etc/resolv.conf")
			t.Errorf("official client, %s: %q, want %s\n--- resolv.conf:\n%s", name, got, want, rc)
		}
	}
	if ns1.Queries.Load() == 0 {
		t.Error("the corp name server was never asked")
	}
	if t.Failed() {
		t.Logf("official client's log:\n%s", tail(o.Daemon.Output()))
	}
	if out, err := m.CLI(o, "down"); err != nil {
		t.Errorf("official down: %v\n%s", err, out)
	}
}
