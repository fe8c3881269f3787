// Package resolver is the agent's DNS service: a server on the peer's
// overlay address that answers for the peer zones management sends and
// forwards every other question to the host's original name servers.
package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// forwardTimeout bounds one question to one upstream server.
const forwardTimeout = 2 * time.Second

// zone is one authoritative zone: names (lower-case, final dot) to their
// IPv4 addresses.
type zone struct {
	name  string
	hosts map[string][]netip.Addr
	ttl   map[string]uint32
}

// Resolver answers DNS questions on one address, over UDP and TCP.
type Resolver struct {
	log  *slog.Logger
	addr netip.AddrPort

	mu        sync.RWMutex
	zones     []zone // longest name first, so the most specific wins
	upstreams []netip.AddrPort

	udp, tcp *dns.Server
	wg       sync.WaitGroup
}

// New returns a resolver that serves nothing yet: Answer works, Listen
// starts the servers.
func New(log *slog.Logger) *Resolver { return &Resolver{log: log} }

// Listen serves on addr (UDP and TCP) until Close. A port already in use
// is an error here, not later.
func (r *Resolver) Listen(addr netip.AddrPort) error {
	pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(addr))
	if err != nil {
		return fmt.Errorf("DNS resolver: %w", err)
	}
	ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(addr))
	if err != nil {
		pc.Close()
		return fmt.Errorf("DNS resolver: %w", err)
	}
	r.addr = addr
	r.udp = &dns.Server{PacketConn: pc, Handler: r, UDPSize: dns.DefaultMsgSize}
	r.tcp = &dns.Server{Listener: ln, Handler: r, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second}
	for _, s := range []*dns.Server{r.udp, r.tcp} {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := s.ActivateAndServe(); err != nil {
				r.log.Debug("DNS resolver stopped", "err", err)
			}
		}()
	}
	return nil
}

// Addr is where it listens (zero before Listen).
func (r *Resolver) Addr() netip.AddrPort { return r.addr }

// Close stops serving and waits for the servers.
func (r *Resolver) Close() {
	for _, s := range []*dns.Server{r.udp, r.tcp} {
		if s != nil {
			_ = s.Shutdown()
		}
	}
	r.wg.Wait()
}

// SetUpstreams sets where questions outside the zones go, tried in order.
func (r *Resolver) SetUpstreams(ups []netip.AddrPort) {
	r.mu.Lock()
	r.upstreams = append([]netip.AddrPort(nil), ups...)
	r.mu.Unlock()
}

// SetZones replaces the zones answered here with management's. Records
// other than A records with an IPv4 address, and names outside their zone,
// are skipped (and counted in the returned error).
func (r *Resolver) SetZones(czs []*mgmtpb.CustomZone) error {
	var zs []zone
	skipped := 0
	for _, cz := range czs {
		name := dns.CanonicalName(cz.GetDomain())
		if _, ok := dns.IsDomainName(name); !ok || name == "." {
			skipped += len(cz.GetRecords()) + 1
			continue
		}
		z := zone{name: name, hosts: map[string][]netip.Addr{}, ttl: map[string]uint32{}}
		for _, rec := range cz.GetRecords() {
			host := dns.CanonicalName(rec.GetName())
			ip, err := netip.ParseAddr(rec.GetRData())
			if _, ok := dns.IsDomainName(host); !ok || rec.GetType() != int64(dns.TypeA) || err != nil || !ip.Is4() || !dns.IsSubDomain(name, host) {
				skipped++
				continue
			}
			z.hosts[host] = append(z.hosts[host], ip)
			z.ttl[host] = uint32(min(max(rec.GetTTL(), 0), 86400))
		}
		zs = append(zs, z)
	}
	// Most specific zone first.
	for i := 1; i < len(zs); i++ {
		for j := i; j > 0 && dns.CountLabel(zs[j].name) > dns.CountLabel(zs[j-1].name); j-- {
			zs[j], zs[j-1] = zs[j-1], zs[j]
		}
	}
	r.mu.Lock()
	r.zones = zs
	r.mu.Unlock()
	if skipped > 0 {
		return fmt.Errorf("DNS: %d records or zones not understood, skipped", skipped)
	}
	return nil
}

// ServeDNS answers one question (dns.Handler).
func (r *Resolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*forwardTimeout)
	defer cancel()
	tcp := false
	if _, ok := w.RemoteAddr().(*net.TCPAddr); ok {
		tcp = true
	}
	m := r.Answer(ctx, q, tcp)
	if !tcp {
		size := dns.MinMsgSize
		if o := q.IsEdns0(); o != nil {
			size = max(int(o.UDPSize()), dns.MinMsgSize)
		}
		m.Truncate(size)
	}
	if err := w.WriteMsg(m); err != nil {
		r.log.Debug("DNS reply", "err", err)
	}
}

// Answer is the reply to q: from a zone held here, else from an upstream
// server (over TCP when tcp is set or the UDP answer was truncated).
func (r *Resolver) Answer(ctx context.Context, q *dns.Msg, tcp bool) *dns.Msg {
	m := new(dns.Msg)
	switch {
	case q.Response || q.Opcode != dns.OpcodeQuery:
		return m.SetRcodeFormatError(q)
	case len(q.Question) != 1:
		m.SetRcode(q, dns.RcodeFormatError)
		return m
	}
	qu := q.Question[0]
	name := dns.CanonicalName(qu.Name)
	r.mu.RLock()
	var z *zone
	for i := range r.zones {
		if dns.IsSubDomain(r.zones[i].name, name) {
			z = &r.zones[i]
			break
		}
	}
	if z == nil {
		ups := r.upstreams
		r.mu.RUnlock()
		return r.forward(ctx, q, ups, tcp)
	}
	defer r.mu.RUnlock()
	m.SetReply(q)
	m.Authoritative = true
	m.RecursionAvailable = true
	ips, ok := z.hosts[name]
	if !ok {
		if name != z.name {
			m.Rcode = dns.RcodeNameError
		}
		m.Ns = []dns.RR{soa(z.name)}
		return m
	}
	if qu.Qclass != dns.ClassINET && qu.Qclass != dns.ClassANY {
		return m
	}
	if qu.Qtype == dns.TypeA || qu.Qtype == dns.TypeANY {
		for _, ip := range ips {
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: qu.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: z.ttl[name]},
				A:   ip.AsSlice(),
			})
		}
		return m
	}
	m.Ns = []dns.RR{soa(z.name)} // the name exists, not with this type
	return m
}

// soa is the zone's SOA for negative answers (their TTL caps caching).
func soa(zone string) dns.RR {
	return &dns.SOA{
		Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: 60},
		Ns:  "ns." + zone, Mbox: "hostmaster." + zone, Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: 60,
	}
}

var errNoUpstream = errors.New("no upstream DNS server")

// forward asks each upstream in turn; SERVFAIL when none answers.
func (r *Resolver) forward(ctx context.Context, q *dns.Msg, ups []netip.AddrPort, tcp bool) *dns.Msg {
	err := errNoUpstream
	for _, up := range ups {
		if up == r.addr {
			continue // never to ourselves
		}
		var m *dns.Msg
		if m, err = exchange(ctx, q, up, tcp); err == nil {
			return m
		}
	}
	r.log.Debug("DNS forward failed", "name", q.Question[0].Name, "err", err)
	m := new(dns.Msg)
	m.SetRcode(q, dns.RcodeServerFailure)
	m.RecursionAvailable = true
	return m
}

func exchange(ctx context.Context, q *dns.Msg, up netip.AddrPort, tcp bool) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: forwardTimeout, UDPSize: dns.DefaultMsgSize}
	if tcp {
		c.Net = "tcp"
	}
	m, _, err := c.ExchangeContext(ctx, q, up.String())
	if err == nil && m.Truncated && !tcp {
		c.Net = "tcp"
		m, _, err = c.ExchangeContext(ctx, q, up.String())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", up, err)
	}
	if !strings.EqualFold(questionName(m), q.Question[0].Name) && len(m.Question) > 0 {
		return nil, fmt.Errorf("%s answered another question", up)
	}
	return m, nil
}

func questionName(m *dns.Msg) string {
	if len(m.Question) == 0 {
		return ""
	}
	return m.Question[0].Name
}
