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

// fakeDNS is the host's resolver: names to addresses, some failing. It
// reports as Go's resolver does: a name without an address of the family
// asked (NODATA) is the same IsNotFound error as a name that does not
// exist, and an empty answer never comes without an error.
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
	if len(out) == 0 {
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	return out, nil
}

// peerSrc is the overlay address the tests ask from; overlay the routes'
// sources.
var (
	peerSrc = netip.MustParseAddr("100.70.0.2")
	overlay = netip.MustParsePrefix("100.64.0.0/10")
)

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
	return f.Answer(context.Background(), peerSrc, q)
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
		"v6only.svc.corp.test": addrs("fd00::9"),
		"flaky.svc.corp.test":  addrs("10.20.0.10"),
	}, fail: map[string]bool{}}
	c := &clock{t: time.Unix(1_700_000_000, 0)}
	changes := new(int)
	o.Lookup, o.Now = up.lookup, c.now
	o.OnChange = func(context.Context) { *changes++ }
	f := New(o)
	f.SetRoutes([]Route{
		{Key: Key([]string{"app.corp.test"}), Domains: []string{"App.Corp.Test."}, Sources: []netip.Prefix{overlay}},
		{Key: Key([]string{"*.svc.corp.test"}), Domains: []string{"*.svc.corp.test"}, Sources: []netip.Prefix{overlay}},
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
		{"unknown name AAAA", "nope.svc.corp.test", dns.TypeAAAA, dns.RcodeNameError, nil, map[string][]netip.Prefix{}},
		// Go reports NODATA as not found: the forwarder must not turn it
		// into NXDOMAIN (the name's A records would be cached away too).
		{"AAAA of an IPv4-only name is NODATA", "app.corp.test", dns.TypeAAAA, dns.RcodeSuccess, nil, map[string][]netip.Prefix{}},
		{"A of an IPv6-only name is NODATA", "v6only.svc.corp.test", dns.TypeA, dns.RcodeSuccess, nil, map[string][]netip.Prefix{}},
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
	t.Run("names per route: the least recently asked gives way", func(t *testing.T) {
		f, up, c, _ := newTest(t, Options{MaxNames: 2})
		for n, a := range map[string]string{"a": "10.1.0.1", "b": "10.1.0.2", "c": "10.1.0.3"} {
			up.names[n+".svc.corp.test"] = addrs(a)
		}
		ask(t, f, "a.svc.corp.test", dns.TypeA)
		c.t = c.t.Add(time.Second)
		ask(t, f, "b.svc.corp.test", dns.TypeA)
		c.t = c.t.Add(time.Second)
		ask(t, f, "a.svc.corp.test", dns.TypeA) // a in use again: b is the oldest
		c.t = c.t.Add(time.Second)
		if m := ask(t, f, "c.svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeSuccess {
			t.Fatalf("third name: rcode %s, want NOERROR", dns.RcodeToString[m.Rcode])
		}
		want := prefixes("10.1.0.1/32", "10.1.0.3/32")
		if d := cmp.Diff(want, f.Learned()[Key([]string{"*.svc.corp.test"})], cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
			t.Fatalf("learned (-want +got):\n%s", d)
		}
	})
	t.Run("names per route are per route", func(t *testing.T) {
		f, up, _, _ := newTest(t, Options{MaxNames: 1})
		up.names["a.svc.corp.test"] = addrs("10.1.0.1")
		ask(t, f, "a.svc.corp.test", dns.TypeA)
		ask(t, f, "app.corp.test", dns.TypeA)
		if got := f.Learned(); len(got) != 2 {
			t.Fatalf("learned %v: one route's cap took the other's name", got)
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
		f.SetRoutes([]Route{{Key: "app.corp.test", Domains: []string{"app.corp.test"}, Sources: []netip.Prefix{overlay}}})
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
}

// TestSetRoutesForgets: a route no longer served loses what it learned;
// its names are then refused.
func TestSetRoutesForgets(t *testing.T) {
	f, _, _, _ := newTest(t, Options{})
	ask(t, f, "app.corp.test", dns.TypeA)
	ask(t, f, "db.svc.corp.test", dns.TypeA)
	if !f.SetRoutes([]Route{{Key: Key([]string{"app.corp.test"}), Domains: []string{"app.corp.test"}, Sources: []netip.Prefix{overlay}}}) {
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

// serveLoopback makes f serve on a free port of 127.0.0.1 (UDP and TCP)
// and returns it.
func serveLoopback(t *testing.T, f *Forwarder) netip.AddrPort {
	t.Helper()
	pc, ln, err := Bind(netip.MustParseAddrPort("127.0.0.1:0"))
	if err != nil {
		t.Fatal(err)
	}
	ap := pc.LocalAddr().(*net.UDPAddr).AddrPort()
	if err := f.Serve(pc, ln); err != nil {
		t.Fatal(err)
	}
	return ap
}

// TestListen serves over UDP and TCP and stops cleanly; it may listen
// again after Close (the engine moves it to another port).
func TestListen(t *testing.T) {
	defer noLeaks(t)
	f, _, _, _ := newTest(t, Options{})
	f.SetRoutes([]Route{{Key: Key([]string{"app.corp.test"}), Domains: []string{"app.corp.test"},
		Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	for range 2 {
		ap := serveLoopback(t, f)
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
		if err := f.Listen(netip.MustParseAddrPort("127.0.0.1:0")); err == nil {
			t.Fatal("second Listen succeeded")
		}
		f.Close()
		f.Close()
	}
}

// TestListenFailureLeavesNothing: a TCP port taken fails Listen and leaves
// the UDP port it had bound free.
func TestListenFailureLeavesNothing(t *testing.T) {
	defer noLeaks(t)
	taken, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	ap := taken.Addr().(*net.TCPAddr).AddrPort()
	f, _, _, _ := newTest(t, Options{})
	if err := f.Listen(ap); err == nil {
		f.Close()
		t.Fatal("Listen on a taken port succeeded")
	}
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
	if err != nil {
		t.Fatalf("the UDP port stayed taken: %v", err)
	}
	pc.Close()
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

// TestSources: only the sources a route's policy accepts may ask about
// its names (not every peer of the mesh, nor a LAN host reaching the
// overlay address); others are REFUSED without a lookup.
func TestSources(t *testing.T) {
	f, up, _, _ := newTest(t, Options{})
	peer := netip.MustParsePrefix("100.70.0.2/32")
	f.SetRoutes([]Route{{Key: Key([]string{"app.corp.test"}), Domains: []string{"app.corp.test"}, Sources: []netip.Prefix{peer}}})
	for _, src := range []string{"100.70.0.3", "192.168.1.5", "::ffff:100.70.0.3"} {
		q := new(dns.Msg)
		q.SetQuestion("app.corp.test.", dns.TypeA)
		if m := f.Answer(context.Background(), netip.MustParseAddr(src), q); m.Rcode != dns.RcodeRefused {
			t.Errorf("from %s: rcode %s, want REFUSED", src, dns.RcodeToString[m.Rcode])
		}
	}
	if len(up.asked) != 0 {
		t.Errorf("looked up %v for refused sources", up.asked)
	}
	q := new(dns.Msg)
	q.SetQuestion("app.corp.test.", dns.TypeA)
	if m := f.Answer(context.Background(), netip.MustParseAddr("::ffff:100.70.0.2"), q); m.Rcode != dns.RcodeSuccess {
		t.Errorf("from the allowed peer: rcode %s", dns.RcodeToString[m.Rcode])
	}
}

// TestSourceQuota: one source adds new names only at SourceBurst, then
// one per SourceRefill; names already known cost nothing, and other
// sources are not held back.
func TestSourceQuota(t *testing.T) {
	f, up, c, _ := newTest(t, Options{SourceBurst: 2, SourceRefill: time.Minute})
	for _, n := range []string{"a", "b", "c", "d"} {
		up.names[n+".svc.corp.test"] = addrs("10.1.0.1")
	}
	for _, n := range []string{"a", "b"} {
		if m := ask(t, f, n+".svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeSuccess {
			t.Fatalf("%s: rcode %s", n, dns.RcodeToString[m.Rcode])
		}
	}
	if m := ask(t, f, "c.svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("a new name past the source's quota: rcode %s, want SERVFAIL", dns.RcodeToString[m.Rcode])
	}
	if m := ask(t, f, "a.svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeSuccess {
		t.Fatalf("a known name past the quota: rcode %s", dns.RcodeToString[m.Rcode])
	}
	q := new(dns.Msg)
	q.SetQuestion("c.svc.corp.test.", dns.TypeA)
	if m := f.Answer(context.Background(), netip.MustParseAddr("100.70.0.9"), q); m.Rcode != dns.RcodeSuccess {
		t.Fatalf("another source: rcode %s", dns.RcodeToString[m.Rcode])
	}
	c.t = c.t.Add(time.Minute)
	if m := ask(t, f, "d.svc.corp.test", dns.TypeA); m.Rcode != dns.RcodeSuccess {
		t.Fatalf("after a refill: rcode %s", dns.RcodeToString[m.Rcode])
	}
}

// TestCompressed: an answer of many records names the question once (no
// ~30x amplification for a small query).
func TestCompressed(t *testing.T) {
	f, up, _, _ := newTest(t, Options{})
	var many []netip.Addr
	for i := range DefaultMaxPerName {
		many = append(many, netip.AddrFrom16([16]byte{0xfd, 15: byte(i + 1)}))
	}
	name := "a-rather-long-name-to-repeat.svc.corp.test"
	up.names[name] = many
	m := ask(t, f, name, dns.TypeAAAA)
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Answer) != DefaultMaxPerName || len(b) > 12+len(name)+6+DefaultMaxPerName*(2+10+16) {
		t.Fatalf("%d answers in %d bytes: not compressed", len(m.Answer), len(b))
	}
}

// TestCloseCancelsLookups: Close ends the lookups in flight instead of
// waiting for the upstream's timeout.
func TestCloseCancelsLookups(t *testing.T) {
	defer noLeaks(t)
	started := make(chan struct{}, 1)
	f := New(Options{Lookup: func(ctx context.Context, _, _ string) ([]netip.Addr, error) {
		started <- struct{}{}
		<-ctx.Done()
		return nil, ctx.Err()
	}})
	f.SetRoutes([]Route{{Key: "app.corp.test", Domains: []string{"app.corp.test"}, Sources: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}})
	ap := serveLoopback(t, f)
	done := make(chan struct{})
	go func() {
		defer close(done)
		q := new(dns.Msg)
		q.SetQuestion("app.corp.test.", dns.TypeA)
		_, _, _ = (&dns.Client{Net: "tcp", Timeout: 15 * time.Second}).Exchange(q, ap.String())
	}()
	<-started
	t0 := time.Now()
	f.Close()
	if d := time.Since(t0); d > 2*time.Second {
		t.Errorf("Close took %v with a lookup in flight", d)
	}
	<-done
}
