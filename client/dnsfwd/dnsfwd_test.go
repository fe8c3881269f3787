package dnsfwd

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/miekg/dns"
)

// fakeDNS is the host's resolver: names to addresses, some failing.
type fakeDNS struct {
	mu    sync.Mutex
	names map[string][]netip.Addr
	fail  map[string]bool // upstream failure (not a not-found)
	asked []string
}

func (r *fakeDNS) lookup(_ context.Context, network, host string) ([]netip.Addr, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.asked = append(r.asked, network+" "+host)
	if r.fail[host] {
		return nil, &net.DNSError{Err: "server misbehaving", Name: host, IsTemporary: true}
	}
	addrs, ok := r.names[host]
	if !ok {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	var out []netip.Addr
	for _, a := range addrs {
		if (network == "ip4") == a.Is4() {
			out = append(out, a)
		}
	}
	return out, nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func ask(t *testing.T, f *Forwarder, name string, qtype uint16) *dns.Msg {
	t.Helper()
	q := new(dns.Msg)
	q.SetQuestion(dns.Fqdn(name), qtype)
	return f.Answer(context.Background(), q)
}

func answerAddrs(m *dns.Msg) []string {
	var out []string
	for _, rr := range m.Answer {
		switch v := rr.(type) {
		case *dns.A:
			out = append(out, v.A.String())
		case *dns.AAAA:
			out = append(out, v.AAAA.String())
		}
	}
	return out
}

func newTest(t *testing.T, o Options) (*Forwarder, *fakeDNS, *clock, *int) {
	up := &fakeDNS{names: map[string][]netip.Addr{
		"app.corp.test":        addrs("10.20.0.5"),
		"db.svc.corp.test":     addrs("10.20.0.6", "10.20.0.7", "fd00::6"),
		"svc.corp.test":        addrs("10.20.0.8"),
		"other.test":           addrs("192.0.2.1"),
		"lo.svc.corp.test":     addrs("127.0.0.1", "169.254.1.1", "10.20.0.9"),
		"nodata.svc.corp.test": nil,
		"flaky.svc.corp.test":  addrs("10.20.0.10"),
	}, fail: map[string]bool{}}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	changes := new(int)
	o.Lookup, o.Now = up.lookup, c.now
	o.OnChange = func() { *changes++ }
	f := New(o)
	f.SetRoutes([]Route{
		{Key: Key([]string{"app.corp.test"}), Domains: []string{"App.Corp.Test."}},
		{Key: Key([]string{"*.svc.corp.test"}), Domains: []string{"*.svc.corp.test"}},
	})
	return f, up, c, changes
}

// TestAnswer: the names of the routes served are resolved upstream and
// their addresses learned for their route; everything else is REFUSED
// without asking upstream.
func TestAnswer(t *testing.T) {
	cases := []struct {
		name    string
		qname   string
		qtype   uint16
		rcode   int
		answers []string
		learned map[string][]netip.Prefix
	}{
		{"exact name", "app.corp.test", dns.TypeA, dns.RcodeSuccess, []string{"10.20.0.5"},
			map[string][]netip.Prefix{"app.corp.test": prefixes("10.20.0.5/32")}},
		{"exact name any case", "APP.corp.test", dns.TypeA, dns.RcodeSuccess, []string{"10.20.0.5"},
			map[string][]netip.Prefix{"app.corp.test": prefixes("10.20.0.5/32")}},
		{"under a wildcard", "db.svc.corp.test", dns.TypeA, dns.RcodeSuccess, []string{"10.20.0.6", "10.20.0.7"},
			map[string][]netip.Prefix{"*.svc.corp.test": prefixes("10.20.0.6/32", "10.20.0.7/32")}},
		{"wildcard base", "svc.corp.test", dns.TypeA, dns.RcodeSuccess, []string{"10.20.0.8"},
			map[string][]netip.Prefix{"*.svc.corp.test": prefixes("10.20.0.8/32")}},
		{"AAAA", "db.svc.corp.test", dns.TypeAAAA, dns.RcodeSuccess, []string{"fd00::6"},
			map[string][]netip.Prefix{"*.svc.corp.test": prefixes("fd00::6/128")}},
		{"unroutable addresses dropped", "lo.svc.corp.test", dns.TypeA, dns.RcodeSuccess, []string{"10.20.0.9"},
			map[string][]netip.Prefix{"*.svc.corp.test": prefixes("10.20.0.9/32")}},
		{"not a served name", "other.test", dns.TypeA, dns.RcodeRefused, nil, map[string][]netip.Prefix{}},
		{"a sibling of the exact name", "x.app.corp.test", dns.TypeA, dns.RcodeRefused, nil, map[string][]netip.Prefix{}},
		{"suffix without a dot", "xsvc.corp.test", dns.TypeA, dns.RcodeRefused, nil, map[string][]netip.Prefix{}},
		{"unknown name", "nope.svc.corp.test", dns.TypeA, dns.RcodeNameError, nil, map[string][]netip.Prefix{}},
		{"no address", "nodata.svc.corp.test", dns.TypeA, dns.RcodeSuccess, nil, map[string][]netip.Prefix{}},
		{"other type is NODATA", "app.corp.test", dns.TypeMX, dns.RcodeSuccess, nil, map[string][]netip.Prefix{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, up, _, _ := newTest(t, Options{})
			m := ask(t, f, tc.qname, tc.qtype)
			if m.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			if d := cmp.Diff(tc.answers, answerAddrs(m)); d != "" {
				t.Errorf("answers (-want +got):\n%s", d)
			}
			for _, rr := range m.Answer {
				if rr.Header().Ttl != AnswerTTL {
					t.Errorf("TTL %d, want %d", rr.Header().Ttl, AnswerTTL)
				}
			}
			if d := cmp.Diff(tc.learned, f.Learned(), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("learned (-want +got):\n%s", d)
			}
			if tc.rcode == dns.RcodeRefused && len(up.asked) > 0 {
				t.Errorf("asked upstream %v for a refused name", up.asked)
			}
		})
	}
}

// TestExpiry: an address stays allowed for Hold after the last answer
// naming it, then goes (with a change reported); asking again renews it.
func TestExpiry(t *testing.T) {
	f, _, c, changes := newTest(t, Options{Hold: time.Minute})
	ask(t, f, "app.corp.test", dns.TypeA)
	if *changes != 1 {
		t.Fatalf("changes %d after the first answer, want 1", *changes)
	}
	c.t = c.t.Add(40 * time.Second)
	ask(t, f, "app.corp.test", dns.TypeA) // renews, nothing new
	if *changes != 1 {
		t.Fatalf("changes %d after a repeated answer, want 1", *changes)
	}
	c.t = c.t.Add(40 * time.Second) // 80 s after the first, 40 s after the renewal
	if got := f.Learned()[Key([]string{"app.corp.test"})]; len(got) != 1 {
		t.Fatalf("renewed address gone: %v", got)
	}
	c.t = c.t.Add(21 * time.Second)
	if got := f.Learned(); len(got) != 0 {
		t.Fatalf("expired addresses still allowed: %v", got)
	}
	if *changes != 1 {
		t.Fatalf("Learned reported a change")
	}
	f.Sweep()
	if *changes != 2 {
		t.Fatalf("changes %d after expiry, want 2", *changes)
	}
}

// TestUpstreamFailure: a failing upstream gets SERVFAIL, unless the name
// is still known, which is answered from what it had.
func TestUpstreamFailure(t *testing.T) {
	f, up, _, _ := newTest(t, Options{})
	up.fail["flaky.svc.corp.test"] = true
	if m := ask(t, f, "flaky.svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("unknown name, failing upstream: rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	up.fail["flaky.svc.corp.test"] = false
	ask(t, f, "flaky.svc.corp.test", dns.TypeA)
	up.fail["flaky.svc.corp.test"] = true
	m := ask(t, f, "flaky.svc.corp.test", dns.TypeA)
	if m.Rcode != dns.RcodeSuccess || !cmp.Equal(answerAddrs(m), []string{"10.20.0.10"}) {
		t.Fatalf("known name, failing upstream: %s %v, want the known address", dns.RcodeToString[m.Rcode], answerAddrs(m))
	}
}

// TestCaps: addresses per name, names per route and the total are capped;
// a name past a cap is not answered (its addresses would not be let
// through).
func TestCaps(t *testing.T) {
	t.Run("per name", func(t *testing.T) {
		f, up, _, _ := newTest(t, Options{MaxPerName: 2})
		up.names["many.svc.corp.test"] = addrs("10.0.0.4", "10.0.0.3", "10.0.0.2", "10.0.0.1")
		m := ask(t, f, "many.svc.corp.test", dns.TypeA)
		if d := cmp.Diff([]string{"10.0.0.1", "10.0.0.2"}, answerAddrs(m)); d != "" {
			t.Fatalf("answers (-want +got):\n%s", d)
		}
	})
	t.Run("names per route", func(t *testing.T) {
		f, up, _, _ := newTest(t, Options{MaxNames: 2})
		for _, n := range []string{"a", "b", "c"} {
			up.names[n+".svc.corp.test"] = addrs("10.1.0." + map[string]string{"a": "1", "b": "2", "c": "3"}[n])
		}
		ask(t, f, "a.svc.corp.test", dns.TypeA)
		ask(t, f, "b.svc.corp.test", dns.TypeA)
		if m := ask(t, f, "c.svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
			t.Fatalf("third name: rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
		}
		if m := ask(t, f, "a.svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeSuccess {
			t.Fatalf("known name past the cap: rcode %s, want NOERROR", dns.RcodeToString[m.Rcode])
		}
		if got := f.Learned()[Key([]string{"*.svc.corp.test"})]; len(got) != 2 {
			t.Fatalf("learned %v, want 2 addresses", got)
		}
	})
	t.Run("in flight", func(t *testing.T) {
		release := make(chan struct{})
		started := make(chan struct{})
		f := New(Options{MaxInflight: 1, Lookup: func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
			close(started)
			<-release
			return addrs("10.20.0.5"), nil
		}})
		f.SetRoutes([]Route{{Key: "app.corp.test", Domains: []string{"app.corp.test"}}})
		done := make(chan *dns.Msg)
		go func() { done <- ask(t, f, "app.corp.test", dns.TypeA) }()
		<-started
		if m := ask(t, f, "app.corp.test", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
			t.Errorf("second lookup at once: rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
		}
		close(release)
		if m := <-done; m.Rcode != dns.RcodeSuccess {
			t.Errorf("first lookup: rcode %s", dns.RcodeToString[m.Rcode])
		}
	})
	t.Run("total", func(t *testing.T) {
		f, _, _, _ := newTest(t, Options{MaxTotal: 2})
		ask(t, f, "db.svc.corp.test", dns.TypeA) // 2 addresses
		if m := ask(t, f, "app.corp.test", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
			t.Fatalf("past the total: rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
		}
	})
}

// TestSetRoutesForgets: a route no longer served loses what it learned;
// its names are then refused.
func TestSetRoutesForgets(t *testing.T) {
	f, _, _, _ := newTest(t, Options{})
	ask(t, f, "app.corp.test", dns.TypeA)
	ask(t, f, "db.svc.corp.test", dns.TypeA)
	if !f.SetRoutes([]Route{{Key: Key([]string{"app.corp.test"}), Domains: []string{"app.corp.test"}}}) {
		t.Errorf("no change reported for a dropped route")
	}
	got := f.Learned()
	if _, ok := got[Key([]string{"*.svc.corp.test"})]; ok || len(got) != 1 {
		t.Fatalf("learned %v, want only app.corp.test's", got)
	}
	if m := ask(t, f, "db.svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeRefused {
		t.Fatalf("name of a dropped route: rcode %s, want REFUSED", dns.RcodeToString[m.Rcode])
	}
}

// TestListen serves over UDP and TCP on two ports and stops cleanly.
func TestListen(t *testing.T) {
	defer noLeaks(t)
	f, _, _, _ := newTest(t, Options{})
	ports := freePorts(t, 2)
	if err := f.Listen(ports...); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, ap := range ports {
		for _, netw := range []string{"udp", "tcp"} {
			c := &dns.Client{Net: netw, Timeout: 2 * time.Second}
			q := new(dns.Msg)
			q.SetQuestion("app.corp.test.", dns.TypeA)
			m, _, err := c.Exchange(q, ap.String())
			if err != nil {
				t.Fatalf("%s %s: %v", netw, ap, err)
			}
			if got := answerAddrs(m); !cmp.Equal(got, []string{"10.20.0.5"}) {
				t.Fatalf("%s %s: answers %v", netw, ap, got)
			}
		}
	}
	if err := f.Listen(ports[0]); err == nil {
		t.Fatal("second Listen succeeded")
	}
	f.Close()
	f.Close()
}

// TestListenFailureLeavesNothing: a port taken fails Listen and leaves
// the other port free.
func TestListenFailureLeavesNothing(t *testing.T) {
	defer noLeaks(t)
	ports := freePorts(t, 1)
	taken, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ports[0]))
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free := freePorts(t, 1)[0]
	f, _, _, _ := newTest(t, Options{})
	if err := f.Listen(free, ports[0]); err == nil {
		f.Close()
		t.Fatal("Listen on a taken port succeeded")
	}
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(free))
	if err != nil {
		t.Fatalf("the free port stayed taken: %v", err)
	}
	pc.Close()
}

func freePorts(t *testing.T, n int) []netip.AddrPort {
	t.Helper()
	var out []netip.AddrPort
	for len(out) < n {
		l, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			t.Fatal(err)
		}
		ap := l.Addr().(*net.TCPAddr).AddrPort()
		l.Close()
		u, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		if err != nil {
			continue
		}
		u.Close()
		out = append(out, ap)
	}
	return out
}

// noLeaks fails when a goroutine of this package outlives the test.
func noLeaks(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var left []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "client/dnsfwd.(*Forwarder)") && !strings.Contains(g, "noLeaks") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("goroutines left:\n%s", strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
