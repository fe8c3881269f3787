package resolver

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestUDPSources: over UDP only the overlay and this host are answered;
// anyone else (a spoofable source) gets nothing at all, while TCP, whose
// handshake proves the source, is answered from anywhere. The host's
// address list is read again for an unknown source at most once per
// localRefresh.
func TestUDPSources(t *testing.T) {
	clk := newClock()
	var reads atomic.Int32
	local := []netip.Addr{netip.MustParseAddr("192.168.1.10"), netip.MustParseAddr("2001:db8::10")}
	r := newResolver(t, Options{Now: clk.now, LocalAddrs: func() ([]netip.Addr, error) {
		reads.Add(1)
		return slices.Clone(local), nil
	}})
	if err := r.Apply(Config{Zones: []Zone{corpZone()}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		src      string
		tcp      bool
		answered bool
	}{
		{"100.64.0.2", false, true},   // the overlay
		{"127.0.0.1", false, true},    // loopback
		{"::1", false, true},          // loopback
		{"192.168.1.10", false, true}, // this host
		{"::ffff:192.168.1.10", false, true},
		{"2001:db8::10", false, true},
		{"203.0.113.7", false, false},  // anyone
		{"192.168.1.11", false, false}, // a neighbour
		{"203.0.113.7", true, true},    // anyone, over TCP
	} {
		w := udpFrom(tc.src)
		if tc.tcp {
			w.remote = &net.TCPAddr{IP: net.ParseIP(tc.src), Port: 40000}
		}
		r.ServeDNS(w, ask("www.corp.test.", dns.TypeA))
		if got := len(w.msgs) == 1; got != tc.answered {
			t.Errorf("%s (tcp %v): answered %v, want %v", tc.src, tc.tcp, got, tc.answered)
		}
	}
	before := reads.Load()
	for range 100 {
		r.ServeDNS(udpFrom("203.0.113.8"), ask("www.corp.test.", dns.TypeA))
	}
	if got := reads.Load() - before; got > 1 {
		t.Fatalf("a flood of unknown sources read the host's addresses %d times, want at most once a second", got)
	}
	// An address the host gains is admitted after the refresh interval.
	local = append(local, netip.MustParseAddr("203.0.113.8"))
	clk.advance(localRefresh + time.Millisecond)
	w := udpFrom("203.0.113.8")
	r.ServeDNS(w, ask("www.corp.test.", dns.TypeA))
	if len(w.msgs) != 1 {
		t.Fatal("a new local address is still refused")
	}
	// A failing list admits nobody new.
	s := newSources(netip.Prefix{}, func() ([]netip.Addr, error) { return nil, errors.New("no netlink") }, clk.now)
	if s.allowed(netip.MustParseAddr("198.51.100.1")) || !s.allowed(netip.MustParseAddr("127.0.0.53")) || s.allowed(netip.Addr{}) {
		t.Fatal("with no address list only loopback is local")
	}
}

// TestCloseCancelsForwards: Close cancels a question waiting for a black
// hole upstream, returns long before the forward's timeout and leaves no
// goroutine behind; questions after Close are refused.
func TestCloseCancelsForwards(t *testing.T) {
	defer noLeaks(t)
	hole := startUpstream(t, "", nil)
	hole.mode.Store(modeSilent)
	r := New(Options{Log: quiet, Timeout: 20 * time.Second, Overlay: testOverlay})
	r.SetUpstreams([]netip.AddrPort{hole.addr})
	addr := listen(t, r)
	got := make(chan error, 1)
	go func() {
		c := &dns.Client{Net: "tcp", Timeout: 30 * time.Second}
		_, _, err := c.Exchange(ask("slow.example.", dns.TypeA), addr.String())
		got <- err
	}()
	deadline := time.Now().Add(5 * time.Second)
	for hole.hits.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the question never reached the upstream")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	r.Close()
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("Close took %v with a forward in flight", took)
	}
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the client still waits after Close")
	}
	if m := query(r, "x.example.", dns.TypeA); m.Rcode != dns.RcodeRefused {
		t.Fatalf("after Close: %v, want REFUSED", m)
	}
}

// TestScrub: of an upstream answer only what answers the question is
// cached and passed on: the records on its CNAME chain, the SOA of a
// negative answer; records for other names, the authority NS records and
// the additional section are dropped.
func TestScrub(t *testing.T) {
	rr := func(s string) dns.RR {
		r, err := dns.NewRR(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	up := startUpstream(t, "", func(q, m *dns.Msg, _ bool) {
		switch q.Question[0].Name {
		case "www.example.":
			m.Answer = []dns.RR{
				rr("www.example. 300 IN CNAME web.example.net."),
				rr("bank.example. 300 IN A 6.6.6.6"), // off the chain
				rr("web.example.net. 300 IN A 192.0.2.80"),
				rr("web.example.net. 300 IN AAAA 2001:db8::80"), // not the type asked
				rr("web.example.net. 300 CH A 192.0.2.81"),      // not the class asked
			}
			m.Ns = []dns.RR{rr("example. 300 IN NS ns.evil.test.")}
			m.Extra = []dns.RR{rr("ns.evil.test. 300 IN A 6.6.6.7"), rr("mail.bank.example. 300 IN A 6.6.6.8")}
		case "none.example.":
			m.Rcode = dns.RcodeNameError
			m.Answer = []dns.RR{rr("bank.example. 300 IN A 6.6.6.6")}
			m.Ns = []dns.RR{
				rr("evil.test. 300 IN SOA ns.evil.test. h.evil.test. 1 2 3 4 5"), // not above the name
				rr("example. 300 IN SOA ns.example. h.example. 1 2 3 4 60"),
			}
		}
	})
	r := newResolver(t, Options{})
	r.SetUpstreams([]netip.AddrPort{up.addr})
	for range 2 { // the second answer comes from the cache
		q := ask("www.example.", dns.TypeA)
		q.SetEdns0(1232, false)
		m := r.Answer(testCtx(), q, false)
		var got []string
		for _, a := range m.Answer {
			got = append(got, a.String())
		}
		want := []string{"www.example.\t300\tIN\tCNAME\tweb.example.net.", "web.example.net.\t300\tIN\tA\t192.0.2.80"}
		if !slices.Equal(got, want) {
			t.Fatalf("answer %q, want %q", got, want)
		}
		if len(m.Ns) != 0 || slices.ContainsFunc(m.Extra, func(rr dns.RR) bool { return rr.Header().Rrtype != dns.TypeOPT }) {
			t.Fatalf("authority %v, additional %v; want none and the OPT record only", m.Ns, m.Extra)
		}
		m = query(r, "none.example.", dns.TypeA)
		if m.Rcode != dns.RcodeNameError || len(m.Answer) != 0 || len(m.Ns) != 1 || m.Ns[0].Header().Name != "example." {
			t.Fatalf("negative answer %v, want NXDOMAIN with example.'s SOA only", m)
		}
	}
	if up.hits.Load() != 2 {
		t.Fatalf("upstream asked %d times, want the scrubbed answers cached", up.hits.Load())
	}
}

// TestOtherClassAnswer: an answer to the same name and type in another
// class is not taken as the answer.
func TestOtherClassAnswer(t *testing.T) {
	up := startUpstream(t, "192.0.2.1", func(q, m *dns.Msg, _ bool) {
		m.Question[0].Qclass = dns.ClassCHAOS
		rr, _ := dns.NewRR(q.Question[0].Name + " 100 IN A 192.0.2.1")
		m.Answer = append(m.Answer, rr)
	})
	r := newResolver(t, Options{Timeout: 200 * time.Millisecond})
	r.SetUpstreams([]netip.AddrPort{up.addr})
	if m := query(r, "x.example.", dns.TypeA); m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
		t.Fatalf("%v, want SERVFAIL", m)
	}
}

// TestPinned: the agent's own servers' names resolve through the host's
// original servers even when an authoritative zone, a match domain and a
// primary group all cover them; other names still follow the config.
func TestPinned(t *testing.T) {
	host := startUpstream(t, "198.51.100.1", nil)
	mesh := startUpstream(t, "10.9.9.9", nil)
	r := newResolver(t, Options{})
	r.SetUpstreams([]netip.AddrPort{host.addr})
	cfg := Config{
		Zones: []Zone{{Domain: "example.com", Records: []Record{
			{Name: "api.example.com", Type: dns.TypeA, TTL: 60, Data: "10.0.0.1"},
		}}},
		Groups: []NameserverGroup{
			{Servers: []netip.AddrPort{mesh.addr}, Primary: true},
			{Servers: []netip.AddrPort{mesh.addr}, Domains: []string{"relay.example.org"}},
		},
	}
	if err := r.Apply(cfg); err != nil {
		t.Fatal(err)
	}
	ask := func(n string) string { return firstA(query(r, n, dns.TypeA)) }
	if ask("api.example.com.") != "10.0.0.1" || ask("signal.example.net.") != "10.9.9.9" || ask("eu.relay.example.org.") != "10.9.9.9" {
		t.Fatal("before pinning the config does not apply")
	}
	r.Pin([]string{"API.example.com.", "signal.example.net", "eu.relay.example.org", "bad name\n"})
	for _, n := range []string{"api.example.com.", "signal.example.net.", "eu.relay.example.org."} {
		if got := ask(n); got != "198.51.100.1" {
			t.Errorf("%s: %q, want the host's server's answer", n, got)
		}
	}
	if ask("www.example.com.") != "" || ask("other.example.net.") != "10.9.9.9" {
		t.Fatal("names not pinned no longer follow the config")
	}
	// Without the host's servers a pinned name follows the config rather
	// than failing.
	r.SetUpstreams(nil)
	if got := ask("api.example.com."); got != "10.0.0.1" {
		t.Fatalf("no host servers: %q", got)
	}
}
