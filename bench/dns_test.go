package bench

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/client/resolver"
)

// TestDNSResolver measures the agent's resolver on loopback: questions per
// second and p99 latency for a mesh name (answered from its zone) and for
// a forwarded name once cached, beside the same questions asked of the
// upstream server directly in the same run (a miekg/dns server answering
// from memory: the floor any forwarder sits on).
func TestDNSResolver(t *testing.T) {
	requireBench(t)
	up := startDNS(t, dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		rr, _ := dns.NewRR(q.Question[0].Name + " 3600 IN A 192.0.2.1")
		m.Answer = []dns.RR{rr}
		_ = w.WriteMsg(m)
	}))
	r := resolver.New(resolver.Options{})
	defer r.Close()
	r.SetUpstreams([]netip.AddrPort{up})
	var recs []resolver.Record
	for i := range 1000 {
		recs = append(recs, resolver.Record{Name: fmt.Sprintf("peer%d.netbird.selfhosted", i), Type: dns.TypeA, TTL: 300, Data: netip.AddrFrom4([4]byte{100, 64, byte(i >> 8), byte(i)}).String()})
	}
	if err := r.Apply(resolver.Config{Zones: []resolver.Zone{{Domain: "netbird.selfhosted", Records: recs, Search: true}}}); err != nil {
		t.Fatal(err)
	}
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.LocalAddr().(*net.UDPAddr).AddrPort()
	l.Close()
	if err := r.Listen(addr); err != nil {
		t.Fatal(err)
	}
	var report []string
	add := func(f string, args ...any) { report = append(report, fmt.Sprintf(f, args...)); t.Logf(f, args...) }
	add("DNS resolver (loopback UDP, 8 clients, 2 s each)")
	for _, c := range []struct {
		what   string
		server netip.AddrPort
		name   string
	}{
		{"upstream directly", up, "www.example.com."},
		{"agent, cached forward", addr, "www.example.com."},
		{"agent, mesh name", addr, "peer500.netbird.selfhosted."},
	} {
		qps, p99 := load(t, c.server, c.name, 8, 2*time.Second)
		add("  %-24s %8.0f q/s  p99 %v", c.what, qps, p99)
	}
	appendReport(t, report)
}

func startDNS(t *testing.T, h dns.Handler) netip.AddrPort {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	s := &dns.Server{PacketConn: pc, Handler: h, NotifyStartedFunc: func() { close(started) }}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.ActivateAndServe()
	}()
	<-started
	t.Cleanup(func() { _ = s.Shutdown(); <-done })
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// load asks name of server from clients goroutines for d and returns the
// answers per second and the 99th percentile latency.
func load(t *testing.T, server netip.AddrPort, name string, clients int, d time.Duration) (float64, time.Duration) {
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	stop := time.Now().Add(d)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &dns.Client{Net: "udp", Timeout: time.Second}
			conn, err := c.Dial(server.String())
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			var mine []time.Duration
			q := new(dns.Msg)
			q.SetQuestion(name, dns.TypeA)
			for time.Now().Before(stop) {
				q.Id = dns.Id()
				start := time.Now()
				m, _, err := c.ExchangeWithConn(q, conn)
				if err != nil || len(m.Answer) != 1 {
					t.Errorf("%s: %v %v", name, m, err)
					return
				}
				mine = append(mine, time.Since(start))
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(lat) == 0 {
		t.Fatal("no answers")
	}
	slices.Sort(lat)
	return float64(len(lat)) / d.Seconds(), lat[len(lat)*99/100]
}
