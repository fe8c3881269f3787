package resolver

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// TestRouting: the longest match domain wins, a primary group takes what
// no match domain does, and without one the host's servers do.
func TestRouting(t *testing.T) {
	host := startUpstream(t, "192.0.2.1", nil)
	corp := startUpstream(t, "192.0.2.2", nil)
	deep := startUpstream(t, "192.0.2.3", nil)
	prim := startUpstream(t, "192.0.2.4", nil)
	split := Config{Groups: []NameserverGroup{
		{Servers: []netip.AddrPort{corp.addr}, Domains: []string{"Corp.Example"}},
		{Servers: []netip.AddrPort{deep.addr}, Domains: []string{"deep.corp.example."}},
	}}
	primary := Config{Groups: append(split.Groups, NameserverGroup{Servers: []netip.AddrPort{prim.addr}, Primary: true})}
	for _, tc := range []struct {
		name string
		cfg  Config
		q    string
		want string
	}{
		{"split: under a match domain", split, "www.corp.example.", "192.0.2.2"},
		{"split: the match domain itself", split, "corp.example.", "192.0.2.2"},
		{"split: the longest match wins", split, "a.deep.corp.example.", "192.0.2.3"},
		{"split: not a label boundary", split, "xcorp.example.", "192.0.2.1"},
		{"split: the rest to the host", split, "example.org.", "192.0.2.1"},
		{"primary: the rest to the primary", primary, "example.org.", "192.0.2.4"},
		{"primary: match domains still win", primary, "www.corp.example.", "192.0.2.2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newResolver(t, Options{Timeout: time.Second})
			r.SetUpstreams([]netip.AddrPort{host.addr})
			if err := r.Apply(tc.cfg); err != nil {
				t.Fatal(err)
			}
			if got := firstA(query(r, tc.q, dns.TypeA)); got != tc.want {
				t.Fatalf("%s answered by %q, want %q", tc.q, got, tc.want)
			}
		})
	}
}

// TestFailover: a dead server (timeout) and a failing one (SERVFAIL,
// REFUSED) are passed over for the next; failsToDown timeouts or REFUSEDs
// take a server out of rotation, SERVFAILs only for servfailNamesToDown
// distinct names; servers out of rotation are still asked as a last
// resort when every other failed; when all fail the answer is SERVFAIL.
func TestFailover(t *testing.T) {
	defer noLeaks(t)
	dead := startUpstream(t, "192.0.2.1", nil)
	dead.mode.Store(modeSilent)
	sick := startUpstream(t, "192.0.2.2", nil)
	sick.mode.Store(modeServfail)
	refusing := startUpstream(t, "192.0.2.3", nil)
	refusing.mode.Store(modeRefuse)
	good := startUpstream(t, "192.0.2.4", nil)
	r := New(Options{Log: quiet, Timeout: 150 * time.Millisecond, Now: newClock().now})
	defer r.Close()
	if err := r.Apply(Config{Groups: []NameserverGroup{{Servers: []netip.AddrPort{dead.addr, sick.addr, refusing.addr, good.addr}, Primary: true}}}); err != nil {
		t.Fatal(err)
	}
	name := func(i int) string { return fmt.Sprintf("n%d.example.", i) }
	for i := range failsToDown {
		if got := firstA(query(r, name(i), dns.TypeA)); got != "192.0.2.4" {
			t.Fatalf("question %d: %q, want the good server's answer", i, got)
		}
	}
	for _, u := range []*upstream{dead, sick, refusing} {
		if u.hits.Load() != failsToDown {
			t.Fatalf("%s asked %d times, want %d", u.addr, u.hits.Load(), failsToDown)
		}
	}
	if !r.health.isDown(dead.addr) || !r.health.isDown(refusing.addr) || r.health.isDown(sick.addr) {
		t.Fatalf("down: dead %v refusing %v sick %v; want the first two only",
			r.health.isDown(dead.addr), r.health.isDown(refusing.addr), r.health.isDown(sick.addr))
	}
	start := time.Now()
	for i := failsToDown; i < servfailNamesToDown; i++ {
		if got := firstA(query(r, name(i), dns.TypeA)); got != "192.0.2.4" {
			t.Fatalf("after failover: %q", got)
		}
	}
	if took := time.Since(start); took > 100*time.Millisecond {
		t.Fatalf("took %v: the dead server was still asked", took)
	}
	if dead.hits.Load() != failsToDown || refusing.hits.Load() != failsToDown {
		t.Fatalf("out of rotation but asked again (%d, %d)", dead.hits.Load(), refusing.hits.Load())
	}
	if sick.hits.Load() != servfailNamesToDown || !r.health.isDown(sick.addr) {
		t.Fatalf("SERVFAIL for %d names: asked %d times, down %v", servfailNamesToDown, sick.hits.Load(), r.health.isDown(sick.addr))
	}
	if query(r, name(100), dns.TypeA); sick.hits.Load() != servfailNamesToDown {
		t.Fatal("SERVFAILing server out of rotation but asked again")
	}

	// Every server in rotation failing: those out of it are the last resort.
	good.mode.Store(modeServfail)
	refusing.mode.Store(modeAnswer)
	if got := firstA(query(r, name(101), dns.TypeA)); got != "192.0.2.3" {
		t.Fatalf("last resort: %q, want the answer of the server out of rotation", got)
	}
	refusing.mode.Store(modeRefuse)
	if m := query(r, name(102), dns.TypeA); m.Rcode != dns.RcodeServerFailure || len(m.Answer) != 0 {
		t.Fatalf("every server failing: %v, want SERVFAIL", m)
	}
}

// TestServfailOneName: any client asking again and again for one name
// its upstream cannot resolve (SERVFAIL) does not take that upstream out
// of rotation; the same number of timeouts does.
func TestServfailOneName(t *testing.T) {
	sick := startUpstream(t, "192.0.2.2", nil)
	sick.mode.Store(modeServfail)
	good := startUpstream(t, "192.0.2.4", nil)
	r := newResolver(t, Options{Timeout: 150 * time.Millisecond, Now: newClock().now})
	r.SetUpstreams([]netip.AddrPort{sick.addr, good.addr})
	for range 3 * failsToDown {
		r.cache.flush() // the next server's answer is cached: ask anew
		if got := firstA(query(r, "broken.example.", dns.TypeA)); got != "192.0.2.4" {
			t.Fatalf("%q, want the next server's answer", got)
		}
	}
	if r.health.isDown(sick.addr) {
		t.Fatal("SERVFAILs for one name took the server out of rotation")
	}
	if query(r, "other.example.", dns.TypeA); sick.hits.Load() != 3*failsToDown+1 {
		t.Fatalf("asked %d times, want still in rotation", sick.hits.Load())
	}
	sick.mode.Store(modeSilent)
	for range failsToDown {
		r.cache.flush()
		query(r, "broken.example.", dns.TypeA)
	}
	if !r.health.isDown(sick.addr) {
		t.Fatal("timeouts did not take the server out of rotation")
	}
}

// TestHealthRecovery: a server out of rotation comes back once the
// prober finds it answering, and only when its probe is due on the
// injected clock.
func TestHealthRecovery(t *testing.T) {
	defer noLeaks(t)
	clk := newClock()
	first := startUpstream(t, "192.0.2.1", nil)
	first.mode.Store(modeRefuse)
	second := startUpstream(t, "192.0.2.2", nil)
	r := New(Options{Log: quiet, Timeout: 150 * time.Millisecond, Now: clk.now, ProbeInterval: 5 * time.Millisecond})
	defer r.Close()
	if err := r.Apply(Config{Groups: []NameserverGroup{{Servers: []netip.AddrPort{first.addr, second.addr}, Domains: []string{"corp.example"}}}}); err != nil {
		t.Fatal(err)
	}
	for i := range failsToDown {
		query(r, "n"+string(rune('a'+i))+".corp.example.", dns.TypeA)
	}
	first.mode.Store(modeAnswer) // healthy again, but out of rotation
	if got := firstA(query(r, "x.corp.example.", dns.TypeA)); got != "192.0.2.2" {
		t.Fatalf("answered by %q, want the second server while the first is out", got)
	}
	time.Sleep(50 * time.Millisecond) // ten probe intervals, none due yet
	if got := first.hits.Load(); got != failsToDown {
		t.Fatalf("probed before its time: %d questions", got)
	}
	clk.advance(minBackoff)
	deadline := time.Now().Add(3 * time.Second)
	for r.health.isDown(first.addr) {
		if time.Now().After(deadline) {
			t.Fatal("the prober never put the server back")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if got := firstA(query(r, "y.corp.example.", dns.TypeA)); got != "192.0.2.1" {
		t.Fatalf("answered by %q, want the first server back in rotation", got)
	}

	// A probe that fails waits twice as long for the next one.
	first.mode.Store(modeSilent)
	for i := range failsToDown {
		query(r, "m"+string(rune('a'+i))+".corp.example.", dns.TypeA)
	}
	before := first.hits.Load()
	clk.advance(minBackoff)
	for first.hits.Load() == before {
		if time.Now().After(deadline) {
			t.Fatal("no probe")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond) // the probe timed out
	first.mode.Store(modeAnswer)
	clk.advance(minBackoff)
	time.Sleep(50 * time.Millisecond)
	if !r.health.isDown(first.addr) {
		t.Fatal("back after one backoff, want two")
	}
	clk.advance(minBackoff)
	for r.health.isDown(first.addr) {
		if time.Now().After(deadline) {
			t.Fatal("the prober never put the server back after backing off")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTruncatedUpstream: a truncated UDP answer is asked again over TCP.
func TestTruncatedUpstream(t *testing.T) {
	big := startUpstream(t, "", func(q, m *dns.Msg, tcp bool) {
		if !tcp {
			m.Truncated = true
			return
		}
		for i := range 60 {
			rr, _ := dns.NewRR(q.Question[0].Name + " 60 IN A 198.51.100." + string(rune('0'+i%10)))
			m.Answer = append(m.Answer, rr)
		}
	})
	r := newResolver(t, Options{Timeout: time.Second})
	r.SetUpstreams([]netip.AddrPort{big.addr})
	m := query(r, "big.example.", dns.TypeA)
	if len(m.Answer) != 60 || m.Truncated {
		t.Fatalf("%d answers (truncated %v), want all 60 over TCP", len(m.Answer), m.Truncated)
	}
	if big.udp.Load() != 1 || big.tcp.Load() != 1 {
		t.Fatalf("udp %d tcp %d questions, want one each", big.udp.Load(), big.tcp.Load())
	}
}
