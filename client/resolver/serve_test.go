package resolver

import (
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// writer is a dns.ResponseWriter that keeps what is written, from a
// chosen client address.
type writer struct {
	remote net.Addr
	mu     sync.Mutex
	msgs   []*dns.Msg
}

func (w *writer) LocalAddr() net.Addr  { return &net.UDPAddr{IP: net.IPv4(100, 64, 0, 1), Port: 53} }
func (w *writer) RemoteAddr() net.Addr { return w.remote }
func (w *writer) WriteMsg(m *dns.Msg) error {
	if _, err := m.Pack(); err != nil {
		return err
	}
	w.mu.Lock()
	w.msgs = append(w.msgs, m)
	w.mu.Unlock()
	return nil
}
func (w *writer) Write(b []byte) (int, error) { return len(b), nil }
func (w *writer) Close() error                { return nil }
func (w *writer) TsigStatus() error           { return nil }
func (w *writer) TsigTimersOnly(bool)         {}
func (w *writer) Hijack()                     {}

func udpFrom(ip string) *writer {
	return &writer{remote: net.UDPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(ip), 40000))}
}

// TestBadQuestions: what is not a plain query gets the rcode saying so.
func TestBadQuestions(t *testing.T) {
	r := newResolver(t, Options{})
	notify := ask("a.example.", dns.TypeSOA)
	notify.Opcode = dns.OpcodeNotify
	update := ask("a.example.", dns.TypeSOA)
	update.Opcode = dns.OpcodeUpdate
	two := ask("a.example.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	none := ask("a.example.", dns.TypeA)
	none.Question = nil
	resp := ask("a.example.", dns.TypeA)
	resp.Response = true
	axfr := ask("a.example.", dns.TypeAXFR)
	edns1 := ask("a.example.", dns.TypeA)
	edns1.SetEdns0(1232, false)
	edns1.IsEdns0().SetVersion(1)
	for _, tc := range []struct {
		name  string
		q     *dns.Msg
		rcode int
	}{
		{"notify", notify, dns.RcodeNotImplemented},
		{"update", update, dns.RcodeNotImplemented},
		{"two questions", two, dns.RcodeFormatError},
		{"no question", none, dns.RcodeFormatError},
		{"a response", resp, dns.RcodeFormatError},
		{"a zone transfer", axfr, dns.RcodeNotImplemented},
		{"EDNS version 1", edns1, dns.RcodeBadVers},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := udpFrom("100.64.0.2")
			r.ServeDNS(w, tc.q)
			if len(w.msgs) != 1 || w.msgs[0].Rcode != tc.rcode || w.msgs[0].Id != tc.q.Id {
				t.Fatalf("got %v, want one reply %s", w.msgs, dns.RcodeToString[tc.rcode])
			}
		})
	}
}

// TestClientTruncation: a client gets at most what it can take over UDP,
// TC set when something was left out, and all of it over TCP.
func TestClientTruncation(t *testing.T) {
	var recs []Record
	for i := range 100 {
		recs = append(recs, Record{Name: "big.corp.test", Type: dns.TypeAAAA, TTL: 60, Data: netip.AddrFrom16([16]byte{0xfd, 15: byte(i)}).String()})
	}
	r := newResolver(t, Options{})
	if err := r.Apply(Config{Zones: []Zone{{Domain: "corp.test", Records: recs}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		edns    uint16 // 0: none
		tcp     bool
		maxLen  int
		all, tc bool
	}{
		{"plain UDP", 0, false, dns.MinMsgSize, false, true},
		{"EDNS0 1232", 1232, false, 1232, false, true},
		// A client asking for more gets no more than the resolver's own
		// buffer size over UDP: a small question must not buy a large
		// answer (amplification with a spoofed source).
		{"EDNS0 4096", 4096, false, serverUDPSize, false, true},
		{"EDNS0 65535", 65535, false, serverUDPSize, false, true},
		{"EDNS0 65535 over TCP", 65535, true, dns.MaxMsgSize, true, false},
		{"TCP", 0, true, dns.MaxMsgSize, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := ask("big.corp.test.", dns.TypeAAAA)
			if tc.edns > 0 {
				q.SetEdns0(tc.edns, false)
			}
			w := udpFrom("100.64.0.2")
			if tc.tcp {
				w.remote = &net.TCPAddr{IP: net.IPv4(100, 64, 0, 2), Port: 40000}
			}
			r.ServeDNS(w, q)
			m := w.msgs[0]
			if m.Len() > tc.maxLen || m.Truncated != tc.tc || (len(m.Answer) == 100) != tc.all {
				t.Fatalf("%d bytes, %d answers, TC %v; want at most %d bytes, all %v, TC %v", m.Len(), len(m.Answer), m.Truncated, tc.maxLen, tc.all, tc.tc)
			}
			if (m.IsEdns0() != nil) != (tc.edns > 0) {
				t.Fatalf("OPT in the reply %v, in the question %v", m.IsEdns0() != nil, tc.edns > 0)
			}
		})
	}
}

// TestConcurrencyCap: a client with PerSource questions in flight gets
// REFUSED for more; another client is still served.
func TestConcurrencyCap(t *testing.T) {
	release := make(chan struct{})
	slow := startUpstream(t, "", func(q, m *dns.Msg, _ bool) { <-release })
	r := newResolver(t, Options{PerSource: 2, Timeout: 5 * time.Second})
	r.SetUpstreams([]netip.AddrPort{slow.addr})
	var wg sync.WaitGroup
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.ServeDNS(udpFrom("100.64.0.2"), ask("slow"+string(rune('a'+i))+".example.", dns.TypeA))
		}()
	}
	deadline := time.Now().Add(3 * time.Second)
	for slow.hits.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the slow questions never reached the upstream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	w := udpFrom("100.64.0.2")
	r.ServeDNS(w, ask("x.example.", dns.TypeA))
	if w.msgs[0].Rcode != dns.RcodeRefused {
		t.Fatalf("a third question in flight: %v, want REFUSED", w.msgs[0])
	}
	if err := r.Apply(Config{Zones: []Zone{corpZone()}}); err != nil {
		t.Fatal(err)
	}
	other := udpFrom("100.64.0.3")
	r.ServeDNS(other, ask("www.corp.test.", dns.TypeA))
	if firstA(other.msgs[0]) != "10.0.0.1" {
		t.Fatalf("another client was refused: %v", other.msgs[0])
	}
	close(release)
	wg.Wait()
	w = udpFrom("100.64.0.2")
	r.ServeDNS(w, ask("www.corp.test.", dns.TypeA))
	if w.msgs[0].Rcode != dns.RcodeSuccess {
		t.Fatalf("slots not given back: %v", w.msgs[0])
	}
}

// TestHostConfig: what the host integration is told, and told again only
// on a change.
func TestHostConfig(t *testing.T) {
	var got []HostConfig
	r := newResolver(t, Options{OnChange: func(hc HostConfig) { got = append(got, hc) }})
	ns := []netip.AddrPort{netip.MustParseAddrPort("192.0.2.53:53")}
	cfg := Config{
		Zones: []Zone{{Domain: "NetBird.Selfhosted.", Search: true}, {Domain: "corp.test", Search: false}},
		Groups: []NameserverGroup{
			{Servers: ns, Domains: []string{"ad.example", "lab.example"}, SearchDomains: true},
			{Servers: ns, Domains: []string{"vpn.example."}},
		},
	}
	if err := r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	hc := r.Config()
	if hc.Primary || !slices.Equal(hc.SearchDomains(), []string{"ad.example", "lab.example", "netbird.selfhosted"}) ||
		!slices.Equal(hc.MatchDomains(), []string{"ad.example", "corp.test", "lab.example", "netbird.selfhosted", "vpn.example"}) {
		t.Fatalf("%+v", hc)
	}
	if err := r.Apply(cfg); err != nil || len(got) != 1 {
		t.Fatalf("%d changes reported for one change (%v)", len(got), err)
	}
	cfg.Groups = append(cfg.Groups, NameserverGroup{Servers: ns, Primary: true})
	if err := r.Apply(cfg); err != nil || len(got) != 2 || !got[1].Primary || !r.Config().Primary {
		t.Fatalf("primary: %v %+v", err, got)
	}
}

// TestNoLeaks: a resolver that served questions over UDP and TCP leaves
// no goroutine behind once closed.
func TestNoLeaks(t *testing.T) {
	defer noLeaks(t)
	up := startUpstream(t, "192.0.2.1", nil)
	r := New(Options{Log: quiet, ProbeInterval: time.Millisecond})
	r.SetUpstreams([]netip.AddrPort{up.addr})
	addr := listen(t, r)
	for _, netw := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: netw, Timeout: 2 * time.Second}
		if m, _, err := c.Exchange(ask("x.example.", dns.TypeA), addr.String()); err != nil || firstA(m) != "192.0.2.1" {
			t.Fatalf("%s: %v %v", netw, m, err)
		}
	}
	r.Close()
	r.Close() // idempotent
}
