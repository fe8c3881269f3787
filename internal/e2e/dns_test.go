package e2e

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// TestPeerDNS: peers resolve each other's names through the agent's
// resolver (full name and short name through the search domain), other
// names are forwarded to the host's original name server, and the host's
// resolv.conf is the agent's only while it is up: down restores it, and a
// SIGKILLed agent's version is reclaimed by its next run and restored by
// its down.
func TestPeerDNS(t *testing.T) {
	m := NewMesh(t)
	upstream(t, m.Lab.NS("pub"), "outside.example.", "192.0.2.7")
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	sa, sb := m.Status(a), m.Status(b)
	ipA, ipB := IPOf(sa), IPOf(sb)
	if sb.FQDN == "" || !strings.HasPrefix(sb.FQDN, "b.") {
		t.Fatalf("b's fqdn %q", sb.FQDN)
	}
	domain := strings.TrimPrefix(sb.FQDN, "b.")
	conf := filepath.Join("/etc/netns", a.NS, "resolv.conf")
	waitFile(t, conf, func(s string) bool { return strings.Contains(s, "nameserver "+ipA+"\n") }, 10*time.Second)
	got, _ := os.ReadFile(conf)
	if !strings.Contains(string(got), "search "+domain+" lab.test\n") || strings.Contains(string(got), "nameserver "+netlab.PubAddr) ||
		!strings.Contains(string(got), "options timeout:1\n") {
		t.Fatalf("a's resolv.conf:\n%s", got)
	}

	lookup := func(name string) string {
		t.Helper()
		// getent goes through the namespace's resolv.conf like any program.
		out, err := m.Lab.Exec(a.NS, "getent", "ahostsv4", name)
		if err != nil {
			return ""
		}
		f := strings.Fields(out)
		if len(f) == 0 {
			return ""
		}
		return f[0]
	}
	for _, name := range []string{sb.FQDN, "b", strings.ToUpper(sb.FQDN)} {
		if got := lookup(name); got != ipB {
			t.Errorf("%s resolved to %q, want b's %s", name, got, ipB)
		}
	}
	if got := lookup("nosuch." + domain); got != "" {
		t.Errorf("a name not in the zone resolved to %s", got)
	}
	if got := lookup("outside.example"); got != "192.0.2.7" {
		t.Errorf("outside.example (forwarded) resolved to %q", got)
	}
	if out, err := m.Lab.Exec(a.NS, "ping", "-c", "1", "-W", "2", "b"); err != nil {
		t.Errorf("ping b by name: %v\n%s", err, out)
	}

	// A new peer's name resolves once it joined.
	c := m.Agent("c", netlab.Home)
	m.Up(c)
	ipC := IPOf(m.Status(c))
	deadline := time.Now().Add(5 * time.Second)
	for lookup("c."+domain) != ipC {
		if time.Now().After(deadline) {
			t.Fatalf("c.%s does not resolve to %s on a", domain, ipC)
		}
		time.Sleep(100 * time.Millisecond)
	}

	if out, err := m.CLI(a, "down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(conf); string(got) != netlab.ResolvConf {
		t.Fatalf("down left resolv.conf as:\n%s", got)
	}

	m.Up(a)
	waitFile(t, conf, func(s string) bool { return strings.Contains(s, "nameserver "+ipA+"\n") }, 10*time.Second)
	a.Daemon.Kill()
	if got, _ := os.ReadFile(conf); string(got) == netlab.ResolvConf {
		t.Fatal("the agent's resolv.conf should outlive a SIGKILL (nothing ran to restore it)")
	}
	a = m.RestartDaemon(a)
	waitStatus(t, m, a, "Connected", 20*time.Second)
	waitFile(t, conf, func(s string) bool { return strings.Contains(s, "nameserver "+ipA+"\n") }, 10*time.Second)
	if got := lookup("outside.example"); got != "192.0.2.7" {
		t.Errorf("after the restart, outside.example resolved to %q (the upstream must come from the saved original)", got)
	}
	if out, err := m.CLI(a, "down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if got, _ := os.ReadFile(conf); string(got) != netlab.ResolvConf {
		t.Fatalf("down after a SIGKILL left resolv.conf as:\n%s", got)
	}

	// --disable-dns: the host's file is left alone.
	if out, err := m.UpAt(a, "http://"+netlab.PubAddr+":"+mgmtPort, "", "--disable-dns"); err != nil {
		t.Fatalf("up --disable-dns: %v\n%s", err, out)
	}
	time.Sleep(time.Second)
	if got, _ := os.ReadFile(conf); string(got) != netlab.ResolvConf {
		t.Fatalf("up --disable-dns changed resolv.conf:\n%s", got)
	}
}

func waitFile(t *testing.T, path string, ok func(string) bool, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		b, _ := os.ReadFile(path)
		if ok(string(b)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never became what was expected:\n%s", path, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// upstream serves one A record at the public segment's name server
// address, as the hosts' original resolver.
func upstream(t *testing.T, ns, name, ip string) {
	t.Helper()
	var pc net.PacketConn
	if err := netlab.Do(ns, func() (err error) {
		pc, err = net.ListenPacket("udp4", netlab.PubAddr+":53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		r := new(dns.Msg)
		r.SetReply(q)
		if len(q.Question) == 1 && strings.EqualFold(q.Question[0].Name, name) && q.Question[0].Qtype == dns.TypeA {
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 60}, A: net.ParseIP(ip)})
		} else if len(q.Question) == 1 && q.Question[0].Qtype == dns.TypeA {
			r.Rcode = dns.RcodeNameError
		}
		_ = w.WriteMsg(r)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown(); <-done })
}
