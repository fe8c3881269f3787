package resolver

import (
	"context"
	"net"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// clock is an injected clock tests move by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// Modes of a test upstream.
const (
	modeAnswer = iota
	modeServfail
	modeRefuse
	modeSilent // drops every question: a dead server
)

// upstream is a real DNS server on loopback (UDP and TCP on one port)
// that answers every A question with ip, counting what it gets.
type upstream struct {
	addr netip.AddrPort
	ip   string
	mode atomic.Int32
	hits atomic.Int32
	udp  atomic.Int32
	tcp  atomic.Int32
	// answer, when set, makes the reply instead (the question is already
	// set up as a reply).
	answer func(q, m *dns.Msg, tcp bool)
}

func startUpstream(t *testing.T, ip string, answer func(q, m *dns.Msg, tcp bool)) *upstream {
	t.Helper()
	u := &upstream{ip: ip, answer: answer}
	var pc net.PacketConn
	var ln net.Listener
	for range 20 {
		var err error
		if pc, err = net.ListenPacket("udp", "127.0.0.1:0"); err != nil {
			t.Fatal(err)
		}
		if ln, err = net.Listen("tcp", pc.LocalAddr().String()); err == nil {
			break
		}
		pc.Close()
		pc = nil
	}
	if pc == nil {
		t.Fatal("no free UDP+TCP port pair on loopback")
	}
	u.addr = pc.LocalAddr().(*net.UDPAddr).AddrPort()
	h := dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		u.hits.Add(1)
		_, tcp := w.RemoteAddr().(*net.TCPAddr)
		if tcp {
			u.tcp.Add(1)
		} else {
			u.udp.Add(1)
		}
		m := new(dns.Msg)
		m.SetReply(q)
		switch u.mode.Load() {
		case modeSilent:
			return
		case modeServfail:
			m.Rcode = dns.RcodeServerFailure
		case modeRefuse:
			m.Rcode = dns.RcodeRefused
		default:
			if u.answer != nil {
				u.answer(q, m, tcp)
			} else if q.Question[0].Qtype == dns.TypeA {
				rr, _ := dns.NewRR(q.Question[0].Name + " 100 IN A " + u.ip)
				m.Answer = append(m.Answer, rr)
			}
		}
		_ = w.WriteMsg(m)
	})
	var wg sync.WaitGroup
	servers := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
	for _, s := range servers {
		started := make(chan struct{})
		s.NotifyStartedFunc = func() { close(started) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = s.ActivateAndServe()
		}()
		<-started // Shutdown before the start would not stop it
	}
	t.Cleanup(func() {
		for _, s := range servers {
			_ = s.Shutdown()
		}
		wg.Wait()
	})
	return u
}

func testCtx() context.Context { return context.Background() }

// query asks r directly (the packet path is tested apart).
func query(r *Resolver, name string, t uint16) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(name, t)
	return r.Answer(testCtx(), q, false)
}

// firstA is the address of m's first A record, "" without one.
func firstA(m *dns.Msg) string {
	for _, rr := range m.Answer {
		if a, ok := rr.(*dns.A); ok {
			return a.A.String()
		}
	}
	return ""
}

// noLeaks fails when a goroutine of this package outlives the test (run
// it with defer after the resolver was closed).
func noLeaks(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		var left []string
		for _, g := range strings.Split(stacks, "\n\n") {
			if strings.Contains(g, "client/resolver.(*Resolver)") || strings.Contains(g, "client/resolver.New") {
				left = append(left, g)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines of the resolver left:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}
