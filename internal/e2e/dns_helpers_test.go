package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// Helpers of the managed-DNS tests (dns_mgmt_test.go): dig against an
// agent's resolver, small authoritative servers standing in for a
// company's name servers, and the REST calls that manage DNS.

// digAnswer is one dig: the response code and the answer's data fields.
type digAnswer struct {
	Rcode   string // NOERROR, NXDOMAIN, SERVFAIL, ... ("" when no answer came)
	Answers []string
	Raw     string
}

var digStatus = regexp.MustCompile(`status: ([A-Z]+)`)

// dig asks server (an address; "" for the namespace's resolv.conf) for
// name's records of type qtype from a's namespace, once, waiting 2 s.
func (m *Mesh) dig(a *Agent, server, name, qtype string) digAnswer {
	return m.digWait(a, server, name, qtype, 2)
}

// digWait is dig waiting up to secs seconds for the answer.
func (m *Mesh) digWait(a *Agent, server, name, qtype string, secs int) digAnswer {
	args := []string{"dig", fmt.Sprintf("+time=%d", secs), "+tries=1", "+noall", "+comments", "+answer", name, qtype}
	if server != "" {
		args = append(args, "@"+server)
	}
	out, _ := m.Lab.Exec(a.NS, args...)
	return parseDig(out)
}

// parseDig reads the status and the answers' data from the output of dig
// +noall +comments +answer.
func parseDig(out string) digAnswer {
	d := digAnswer{Raw: out}
	if s := digStatus.FindStringSubmatch(out); s != nil {
		d.Rcode = s[1]
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		if f := strings.Fields(line); len(f) >= 5 {
			d.Answers = append(d.Answers, f[len(f)-1])
		}
	}
	return d
}

// is reports a NOERROR answer whose only record data is want.
func (d digAnswer) is(want string) bool {
	return d.Rcode == "NOERROR" && len(d.Answers) == 1 && d.Answers[0] == want
}

// waitDig repeats a dig until ok or the deadline; it returns the last
// answer and how long it took.
func (m *Mesh) waitDig(a *Agent, server, name, qtype string, within time.Duration, ok func(digAnswer) bool) (digAnswer, time.Duration, bool) {
	start := time.Now()
	for {
		d := m.dig(a, server, name, qtype)
		if ok(d) {
			return d, time.Since(start), true
		}
		if time.Since(start) > within {
			return d, time.Since(start), false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// getent resolves name through the namespace's libc resolver (resolv.conf
// and nsswitch, as any program does); "" when it does not resolve.
func (m *Mesh) getent(a *Agent, name string) string {
	out, err := m.Lab.Exec(a.NS, "getent", "ahostsv4", name)
	if err != nil {
		return ""
	}
	if f := strings.Fields(out); len(f) > 0 {
		return f[0]
	}
	return ""
}

// waitGetent repeats getent until name resolves to want or the deadline.
func (m *Mesh) waitGetent(a *Agent, name, want string, within time.Duration) (string, bool) {
	var got string
	for start := time.Now(); time.Since(start) < within; time.Sleep(100 * time.Millisecond) {
		if got = m.getent(a, name); got == want {
			return got, true
		}
	}
	return got, false
}

// zoneServer is an authoritative server for one domain on a host of the
// public segment: every A question under the domain gets answer; others
// are refused. Queries counts what it was asked.
type zoneServer struct {
	NS      string
	Addr    netip.Addr
	Answer  string
	Queries atomic.Int64
}

// serveZone starts a zoneServer on a new internet host.
func serveZone(t *testing.T, m *Mesh, host, domain, answer string) *zoneServer {
	t.Helper()
	ns, addr := m.Lab.Internet(host)
	z := &zoneServer{NS: ns, Addr: addr, Answer: answer}
	var pc net.PacketConn
	if err := netlab.Do(ns, func() (err error) {
		pc, err = net.ListenPacket("udp4", addr.String()+":53")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	domain = dns.Fqdn(domain)
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		z.Queries.Add(1)
		r := new(dns.Msg)
		r.SetReply(q)
		r.Authoritative = true
		switch {
		case len(q.Question) != 1 || !dns.IsSubDomain(domain, strings.ToLower(q.Question[0].Name)):
			r.Rcode = dns.RcodeRefused
		case q.Question[0].Qtype == dns.TypeA:
			r.Answer = append(r.Answer, &dns.A{Hdr: dns.RR_Header{Name: q.Question[0].Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 30},
				A: net.ParseIP(answer)})
		}
		_ = w.WriteMsg(r)
	})}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown(); <-done })
	return z
}

// die cuts the server's host off the network: its packets vanish (no
// port-unreachable to fail over on, the hard case).
func (z *zoneServer) die(t *testing.T, m *Mesh) {
	t.Helper()
	if out, err := m.Lab.Exec(z.NS, "ip", "link", "set", "eth0", "down"); err != nil {
		t.Fatalf("take %s down: %v\n%s", z.Addr, err, out)
	}
}

// nsGroupBody is a nameserver group request for match domains (none:
// primary) to servers on port 53, distributed to groups.
func nsGroupBody(name string, servers []netip.Addr, domains, groups []string) map[string]any {
	var nss []map[string]any
	for _, s := range servers {
		nss = append(nss, map[string]any{"ip": s.String(), "ns_type": "udp", "port": 53})
	}
	if domains == nil {
		domains = []string{}
	}
	return map[string]any{"name": name, "description": "", "nameservers": nss, "enabled": true, "groups": groups,
		"primary": len(domains) == 0, "domains": domains, "search_domains_enabled": false}
}

// customZone creates a zone for domain distributed to groups with the
// given A records (name -> address) and returns the zone's ID.
func customZone(t *testing.T, admin restClient, domain string, groups []string, records map[string]string) string {
	t.Helper()
	z := admin.call("POST", "/api/dns/zones", map[string]any{"name": domain, "domain": domain, "enable_search_domain": false,
		"distribution_groups": groups, "enabled": true}, 200)
	id, _ := z["id"].(string)
	if id == "" {
		t.Fatalf("POST /api/dns/zones: no id in %v", z)
	}
	for name, ip := range records {
		admin.call("POST", "/api/dns/zones/"+id+"/records", map[string]any{"name": name, "type": "A", "content": ip, "ttl": 30}, 200)
	}
	return id
}

// setAccountSetting changes one of the account's settings (e.g.
// "dns_domain"), keeping the others as they are.
func setAccountSetting(t *testing.T, admin restClient, name string, value any) {
	t.Helper()
	acc := getList(t, admin, "/api/accounts")[0]
	settings, _ := acc["settings"].(map[string]any)
	if settings == nil {
		t.Fatalf("GET /api/accounts: no settings in %v", acc)
	}
	settings[name] = value
	admin.call("PUT", "/api/accounts/"+acc["id"].(string), map[string]any{"settings": settings}, 200)
}

// renamePeer sets a peer's name through PUT /api/peers/{id}.
func renamePeer(t *testing.T, admin restClient, id, name string) {
	t.Helper()
	admin.call("PUT", "/api/peers/"+id, map[string]any{"name": name, "ssh_enabled": false, "login_expiration_enabled": false,
		"inactivity_expiration_enabled": false, "approval_required": false}, 200)
}

// debugDNS is what a failed DNS test prints about an agent.
func (m *Mesh) debugDNS(a *Agent) string {
	st, _ := m.CLI(a, "status", "-d")
	rc, _ := m.Lab.Exec(a.NS, "cat", "/etc/resolv.conf")
	return fmt.Sprintf("--- %s status -d:\n%s\n--- resolv.conf:\n%s\n--- daemon log (tail):\n%s", a.Name, st, rc, tail(a.Daemon.Output()))
}
