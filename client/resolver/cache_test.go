package resolver

import (
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestCacheTTL: a cached answer counts its TTLs down on the injected
// clock and is asked again once they run out.
func TestCacheTTL(t *testing.T) {
	clk := newClock()
	up := startUpstream(t, "192.0.2.1", nil) // TTL 100
	r := newResolver(t, Options{Now: clk.now})
	r.SetUpstreams([]netip.AddrPort{up.addr})
	for _, step := range []struct {
		after   time.Duration
		hits    int32
		ttl     uint32
		comment string
	}{
		{0, 1, 100, "first: asked upstream"},
		{30 * time.Second, 1, 70, "30 s later: from the cache"},
		{69 * time.Second, 1, 1, "99 s: still cached"},
		{time.Second, 2, 100, "100 s: expired, asked again"},
	} {
		clk.advance(step.after)
		m := query(r, "www.example.", dns.TypeA)
		if up.hits.Load() != step.hits || len(m.Answer) != 1 || m.Answer[0].Header().Ttl != step.ttl {
			t.Fatalf("%s: %d questions upstream, answer %v; want %d, TTL %d", step.comment, up.hits.Load(), m.Answer, step.hits, step.ttl)
		}
	}
	if m := query(r, "WWW.example.", dns.TypeA); up.hits.Load() != 2 || m.Question[0].Name != "WWW.example." {
		t.Fatalf("names are cached without case, answered with the question's: %v", m)
	}
}

// TestNegativeCache: NXDOMAIN and NODATA are cached for min(SOA TTL, SOA
// MINIMUM) (RFC 2308); without a SOA, and SERVFAIL, not at all.
func TestNegativeCache(t *testing.T) {
	clk := newClock()
	up := startUpstream(t, "", func(q, m *dns.Msg, _ bool) {
		soa, _ := dns.NewRR("example. 300 IN SOA ns.example. h.example. 1 2 3 4 50")
		switch q.Question[0].Name {
		case "nx.example.":
			m.Rcode, m.Ns = dns.RcodeNameError, []dns.RR{soa}
		case "nodata.example.":
			m.Ns = []dns.RR{soa}
		case "nosoa.example.":
			m.Rcode = dns.RcodeNameError
		case "fail.example.":
			m.Rcode = dns.RcodeServerFailure
		}
	})
	r := newResolver(t, Options{Now: clk.now, Timeout: 200 * time.Millisecond})
	r.SetUpstreams([]netip.AddrPort{up.addr})
	for _, tc := range []struct {
		name   string
		rcode  int
		cached time.Duration // 0: not cached
	}{
		{"nx.example.", dns.RcodeNameError, 50 * time.Second},
		{"nodata.example.", dns.RcodeSuccess, 50 * time.Second},
		{"nosoa.example.", dns.RcodeNameError, 0},
		{"fail.example.", dns.RcodeServerFailure, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := up.hits.Load()
			if m := query(r, tc.name, dns.TypeA); m.Rcode != tc.rcode {
				t.Fatalf("rcode %s, want %s", dns.RcodeToString[m.Rcode], dns.RcodeToString[tc.rcode])
			}
			clk.advance(time.Second)
			m := query(r, tc.name, dns.TypeA)
			asked := up.hits.Load() - before
			if tc.cached == 0 {
				if asked != 2 {
					t.Fatalf("asked upstream %d times, want 2 (not cached)", asked)
				}
				return
			}
			if asked != 1 || m.Rcode != tc.rcode || m.Ns[0].Header().Ttl != 299 {
				t.Fatalf("asked %d times; %v", asked, m)
			}
			clk.advance(tc.cached)
			query(r, tc.name, dns.TypeA)
			if up.hits.Load()-before != 2 {
				t.Fatal("still cached after the negative TTL")
			}
		})
	}
}

// TestCacheBounds: the least recently used entry goes when the cache is
// full, in entries or in bytes.
func TestCacheBounds(t *testing.T) {
	clk := newClock()
	c := newCache(clk.now, 2, 1<<20)
	msg := func(name string) (*dns.Msg, *dns.Msg) {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		m := new(dns.Msg)
		m.SetReply(q)
		rr, _ := dns.NewRR(name + " 60 IN A 192.0.2.1")
		m.Answer = []dns.RR{rr}
		return q, m
	}
	qa, ma := msg("a.example.")
	qb, mb := msg("b.example.")
	qc, mc := msg("c.example.")
	c.put(qa, ma)
	c.put(qb, mb)
	c.get(qa) // a is now more recent than b
	c.put(qc, mc)
	if _, ok := c.get(qb); ok {
		t.Fatal("b, the least recently used, was kept")
	}
	if _, ok := c.get(qa); !ok {
		t.Fatal("a was evicted")
	}
	small := newCache(clk.now, 100, ma.Len()+mb.Len())
	small.put(qa, ma)
	small.put(qb, mb)
	small.put(qc, mc)
	if small.len() != 2 || small.bytes > ma.Len()+mb.Len() {
		t.Fatalf("%d entries, %d bytes: over the byte bound", small.len(), small.bytes)
	}
}
