package engine

import (
	"context"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/client/resolver"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

func TestDNSServerName(t *testing.T) {
	for in, want := range map[string]string{
		"mgmt.example.com:443":                          "mgmt.example.com",
		"https://mgmt.example.com:33073":                "mgmt.example.com",
		"localhost:33073":                               "localhost",
		"rels://relay.example.com:443/relay":            "relay.example.com",
		"stun:stun.example.com:3478":                    "stun.example.com",
		"stun:stun.example.com":                         "stun.example.com",
		"turn:user@turn.example.com:3478?transport=udp": "turn.example.com",
		"turns:[2001:db8::1]:5349":                      "2001:db8::1",
		"[2001:db8::1]:443":                             "2001:db8::1",
		"signal.example.com":                            "signal.example.com",
	} {
		if got := serverName(in); got != want {
			t.Errorf("serverName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDNSPinsControlPlane: the names of management, signal, the relays
// and STUN/TURN resolve through the host's original servers although a
// primary group and an authoritative zone from management cover them.
func TestDNSPinsControlPlane(t *testing.T) {
	hostUp := dnsUpstream(t, "198.51.100.1")
	meshUp := dnsUpstream(t, "10.9.9.9")
	res := resolver.New(resolver.Options{Log: slog.New(slog.DiscardHandler)})
	defer res.Close()
	d := &dnsService{log: slog.New(slog.DiscardHandler), res: res}
	res.SetUpstreams([]netip.AddrPort{hostUp})
	// Straight to the resolver: the map's own checks refuse loopback
	// nameservers, which this test's upstreams are.
	if err := res.Apply(resolver.Config{
		Groups: []resolver.NameserverGroup{{Servers: []netip.AddrPort{meshUp}, Primary: true}},
		Zones: []resolver.Zone{{Domain: "example.com", Records: []resolver.Record{
			{Name: "mgmt.example.com", Type: dns.TypeA, TTL: 60, Data: "10.0.0.1"},
			{Name: "www.example.com", Type: dns.TypeA, TTL: 60, Data: "10.0.0.2"},
		}}},
	}); err != nil {
		t.Fatal(err)
	}
	d.pinServers("mgmt.example.com:443", &mgmtpb.NetbirdConfig{
		Signal: &mgmtpb.HostConfig{Uri: "signal.example.net:10000"},
		Relay:  &mgmtpb.RelayConfig{Urls: []string{"rels://relay.example.net:443"}},
		Stuns:  []*mgmtpb.HostConfig{{Uri: "stun:stun.example.net:3478"}, {Uri: "stun:192.0.2.1:3478"}},
		Turns:  []*mgmtpb.ProtectedHostConfig{{HostConfig: &mgmtpb.HostConfig{Uri: "turn:turn.example.net:3478?transport=udp"}}},
	})
	// A later config without relays keeps the relay's name pinned.
	d.pinServers("mgmt.example.com:443", &mgmtpb.NetbirdConfig{Signal: &mgmtpb.HostConfig{Uri: "signal.example.net:10000"}})
	want := []string{"mgmt.example.com", "signal.example.net", "relay.example.net", "stun.example.net", "turn.example.net"}
	if !slices.Equal(d.pinned, want) {
		t.Fatalf("pinned %q, want %q", d.pinned, want)
	}
	ask := func(name string) string {
		q := new(dns.Msg)
		q.SetQuestion(name, dns.TypeA)
		m := res.Answer(context.Background(), q, false)
		for _, rr := range m.Answer {
			if a, ok := rr.(*dns.A); ok {
				return a.A.String()
			}
		}
		return dns.RcodeToString[m.Rcode]
	}
	for _, n := range want {
		if got := ask(n + "."); got != "198.51.100.1" {
			t.Errorf("%s: %s, want the host's server's answer", n, got)
		}
	}
	if got := ask("www.example.com."); got != "10.0.0.2" {
		t.Errorf("a zone name: %s", got)
	}
	if got := ask("other.example.net."); got != "10.9.9.9" {
		t.Errorf("an unpinned name: %s, want the primary group's answer", got)
	}
}

// dnsUpstream is a DNS server on loopback UDP answering every A question
// with ip, stopped when the test ends.
func dnsUpstream(t *testing.T, ip string) netip.AddrPort {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, q *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(q)
		if q.Question[0].Qtype == dns.TypeA {
			rr, _ := dns.NewRR(q.Question[0].Name + " 60 IN A " + ip)
			m.Answer = append(m.Answer, rr)
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_ = srv.ActivateAndServe()
	}()
	<-started
	t.Cleanup(func() {
		_ = srv.Shutdown()
		wg.Wait()
	})
	return pc.LocalAddr().(*net.UDPAddr).AddrPort()
}

// TestDNSRefusesOverlayNameservers: a nameserver group from the map whose
// server is this agent's own address or another overlay address is not
// used (forwarding there loops or leaves the host's DNS to a peer).
func TestDNSRefusesOverlayNameservers(t *testing.T) {
	for _, ns := range []string{"100.70.0.5", "100.70.9.9"} {
		res := resolver.New(resolver.Options{Log: slog.New(slog.DiscardHandler)})
		d := &dnsService{log: slog.New(slog.DiscardHandler), res: res,
			ip: netip.MustParseAddr("100.70.0.5"), overlay: netip.MustParsePrefix("100.70.0.0/16")}
		d.apply(&mgmtpb.DNSConfig{ServiceEnable: true, NameServerGroups: []*mgmtpb.NameServerGroup{{
			Primary: true, NameServers: []*mgmtpb.NameServer{{IP: ns, NSType: 1, Port: 53}}}}}, "a.netbird.selfhosted")
		if res.Config().Primary {
			t.Errorf("a primary nameserver group at overlay address %s is used", ns)
		}
		res.Close()
	}
}
