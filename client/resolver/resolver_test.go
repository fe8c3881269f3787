package resolver

import (
	"context"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/internal/dnszone"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// testOverlay is the overlay of newResolver's resolvers: the clients of
// the packet-path tests (udpFrom) are in it.
var testOverlay = netip.MustParsePrefix("100.64.0.0/10")

// newResolver is a resolver closed (its prober stopped) when the test ends.
func newResolver(t testing.TB, o Options) *Resolver {
	if o.Log == nil {
		o.Log = quiet
	}
	if !o.Overlay.IsValid() {
		o.Overlay = testOverlay
	}
	r := New(o)
	t.Cleanup(r.Close)
	return r
}

// setZones applies management's zones as the engine would.
func setZones(r *Resolver, czs []*mgmtpb.CustomZone) error {
	cfg, err := FromProto(&mgmtpb.DNSConfig{ServiceEnable: true, CustomZones: czs})
	if aerr := r.Apply(cfg); aerr != nil {
		return aerr
	}
	return err
}

func peerZone() []*mgmtpb.CustomZone {
	return []*mgmtpb.CustomZone{dnszone.Peers("netbird.selfhosted", []dnszone.Host{
		{FQDN: "a.netbird.selfhosted", IP: netip.MustParseAddr("100.64.0.1")},
		{FQDN: "b.netbird.selfhosted", IP: netip.MustParseAddr("100.64.0.2")},
	})}
}

func ask(name string, t uint16) *dns.Msg {
	q := new(dns.Msg)
	q.SetQuestion(name, t)
	return q
}

// listen starts a resolver on a free loopback port.
func listen(t *testing.T, r *Resolver) netip.AddrPort {
	t.Helper()
	l, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ap := l.LocalAddr().(*net.UDPAddr).AddrPort()
	l.Close()
	if err := r.Listen(ap); err != nil {
		t.Skipf("port %s taken between probe and listen: %v", ap, err)
	}
	t.Cleanup(r.Close)
	return ap
}

func TestZoneAnswers(t *testing.T) {
	r := newResolver(t, Options{})
	if err := setZones(r, peerZone()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m := r.Answer(ctx, ask("B.NetBird.SelfHosted.", dns.TypeA), false)
	if m.Rcode != dns.RcodeSuccess || !m.Authoritative || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "100.64.0.2" {
		t.Fatalf("b: %v", m)
	}
	if m.Answer[0].Header().Name != "B.NetBird.SelfHosted." {
		t.Fatalf("the answer must repeat the question's name as asked: %v", m.Answer[0])
	}
	if m := r.Answer(ctx, ask("c.netbird.selfhosted.", dns.TypeA), false); m.Rcode != dns.RcodeNameError || len(m.Ns) != 1 {
		t.Fatalf("unknown name: %v", m)
	}
	if m := r.Answer(ctx, ask("a.netbird.selfhosted.", dns.TypeAAAA), false); m.Rcode != dns.RcodeSuccess || len(m.Answer) != 0 {
		t.Fatalf("AAAA of a known name: %v, want NOERROR without answers", m)
	}
	if m := r.Answer(ctx, ask("netbird.selfhosted.", dns.TypeA), false); m.Rcode != dns.RcodeSuccess {
		t.Fatalf("the zone apex exists: %v", m)
	}
	// Outside the zone, with no upstream: SERVFAIL, not a made-up answer.
	if m := r.Answer(ctx, ask("example.com.", dns.TypeA), false); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("no upstream: %v", m)
	}
	two := ask("a.netbird.selfhosted.", dns.TypeA)
	two.Question = append(two.Question, two.Question[0])
	if m := r.Answer(ctx, two, false); m.Rcode != dns.RcodeFormatError {
		t.Fatalf("two questions: %v", m)
	}
	// Zones are replaced, not merged.
	if err := setZones(r, nil); err != nil {
		t.Fatal(err)
	}
	if m := r.Answer(ctx, ask("a.netbird.selfhosted.", dns.TypeA), false); m.Rcode != dns.RcodeServerFailure {
		t.Fatalf("after the zones went: %v", m)
	}
}

func TestHostileZones(t *testing.T) {
	r := newResolver(t, Options{})
	err := setZones(r, []*mgmtpb.CustomZone{
		{Domain: "netbird.selfhosted.", Records: []*mgmtpb.SimpleRecord{
			{Name: "ok.netbird.selfhosted", Type: 1, RData: "100.64.0.9", TTL: 300},
			{Name: "evil.example.com", Type: 1, RData: "6.6.6.6"},      // outside the zone
			{Name: "v6.netbird.selfhosted", Type: 1, RData: "fd00::1"}, // not IPv4
			{Name: "bad", Type: 28, RData: "100.64.0.1"},
			{Name: strings.Repeat("x", 300) + ".netbird.selfhosted", Type: 1, RData: "100.64.0.1"},
			{Name: "neg.netbird.selfhosted", Type: 1, RData: "100.64.0.3", TTL: -5},
		}},
		{Domain: "."}, // the root: would capture every name
	})
	if err == nil {
		t.Fatal("skipped records must be reported")
	}
	ctx := context.Background()
	if m := r.Answer(ctx, ask("ok.netbird.selfhosted.", dns.TypeA), false); len(m.Answer) != 1 {
		t.Fatalf("the valid record was lost: %v", m)
	}
	if m := r.Answer(ctx, ask("evil.example.com.", dns.TypeA), false); len(m.Answer) != 0 {
		t.Fatalf("a record outside its zone answered: %v", m)
	}
	if m := r.Answer(ctx, ask("neg.netbird.selfhosted.", dns.TypeA), false); len(m.Answer) != 1 || m.Answer[0].Header().Ttl != 0 {
		t.Fatalf("negative TTL: %v", m)
	}
}

// TestServeAndForward runs the resolver and an upstream as real servers
// over UDP and TCP: zone names from the resolver, the rest forwarded, a
// large upstream answer retried over TCP and truncated for a UDP client.
func TestServeAndForward(t *testing.T) {
	up := newResolver(t, Options{})
	var recs []*mgmtpb.SimpleRecord
	for i := range 60 {
		recs = append(recs, &mgmtpb.SimpleRecord{Name: "big.upstream.test", Type: 1, RData: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}).String(), TTL: 60})
	}
	recs = append(recs, &mgmtpb.SimpleRecord{Name: "www.upstream.test", Type: 1, RData: "192.0.2.80", TTL: 60})
	if err := setZones(up, []*mgmtpb.CustomZone{{Domain: "upstream.test.", Records: recs}}); err != nil {
		t.Fatal(err)
	}
	upAddr := listen(t, up)

	r := newResolver(t, Options{})
	if err := setZones(r, peerZone()); err != nil {
		t.Fatal(err)
	}
	r.SetUpstreams([]netip.AddrPort{netip.MustParseAddrPort("127.0.0.1:1"), upAddr}) // the first is dead
	addr := listen(t, r)

	for _, netw := range []string{"udp", "tcp"} {
		c := &dns.Client{Net: netw, Timeout: 5 * time.Second}
		m, _, err := c.Exchange(ask("a.netbird.selfhosted.", dns.TypeA), addr.String())
		if err != nil || len(m.Answer) != 1 {
			t.Fatalf("%s zone name: %v %v", netw, m, err)
		}
		m, _, err = c.Exchange(ask("www.upstream.test.", dns.TypeA), addr.String())
		if err != nil || len(m.Answer) != 1 || m.Answer[0].(*dns.A).A.String() != "192.0.2.80" {
			t.Fatalf("%s forwarded: %v %v", netw, m, err)
		}
		m, _, err = c.Exchange(ask("big.upstream.test.", dns.TypeA), addr.String())
		if err != nil {
			t.Fatal(err)
		}
		if netw == "tcp" && len(m.Answer) != 60 {
			t.Fatalf("tcp: %d answers, want all 60", len(m.Answer))
		}
		m.Compress = true // as it was sent
		if netw == "udp" && (!m.Truncated || m.Len() > dns.MinMsgSize) {
			t.Fatalf("udp: a %d-byte answer, truncated %v: a plain UDP client gets at most 512 bytes and the TC bit", m.Len(), m.Truncated)
		}
	}
	// Garbage over UDP gets no answer and does not stop the server.
	conn, err := net.Dial("udp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = conn.Write([]byte{0xde, 0xad, 0xbe, 0xef})
	conn.Close()
	c := &dns.Client{Net: "udp", Timeout: 5 * time.Second}
	if m, _, err := c.Exchange(ask("b.netbird.selfhosted.", dns.TypeA), addr.String()); err != nil || len(m.Answer) != 1 {
		t.Fatalf("after garbage: %v %v", m, err)
	}
}

// FuzzAnswer: any bytes a local program can send, once they parse as a
// DNS message, get an answer that packs, with the question's ID, and never
// an answer for a name outside the zones (there is no upstream here).
func FuzzAnswer(f *testing.F) {
	for _, q := range []*dns.Msg{ask("a.netbird.selfhosted.", dns.TypeA), ask("x.example.", dns.TypeMX), ask("netbird.selfhosted.", dns.TypeANY)} {
		b, _ := q.Pack()
		f.Add(b)
	}
	f.Add([]byte{0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x0c, 0, 1, 0, 1}) // a compression loop
	r := newResolver(f, Options{})
	if err := setZones(r, peerZone()); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		q := new(dns.Msg)
		if err := q.Unpack(b); err != nil {
			return // the server drops what does not parse
		}
		m := r.Answer(context.Background(), q, false)
		if m.Id != q.Id {
			t.Fatalf("answer id %d for question %d", m.Id, q.Id)
		}
		if _, err := m.Pack(); err != nil {
			t.Fatalf("answer does not pack: %v", err)
		}
		for _, rr := range m.Answer {
			if !dns.IsSubDomain("netbird.selfhosted.", dns.CanonicalName(rr.Header().Name)) {
				t.Fatalf("answered for %s", rr.Header().Name)
			}
		}
	})
}
