package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"
)

// upstreamUDPSize is the EDNS0 buffer size offered to upstream servers:
// the size the DNS flag day 2020 settled on, which avoids fragmentation;
// a larger answer comes truncated and is asked again over TCP.
const upstreamUDPSize = 1232

// matchRoute sends the questions under domain to servers.
type matchRoute struct {
	domain  string // canonical
	servers []netip.AddrPort
}

// routes are where forwarded questions go: the longest matching domain of
// a nameserver group (split DNS), else the primary groups' servers, else
// (primary nil) the host's original servers.
type routes struct {
	match   []matchRoute // most labels first
	primary []netip.AddrPort
}

// buildRoutes merges the groups into routes (groups sharing a match
// domain, or primary ones, pool their servers in order) and returns the
// name each server is probed with.
func buildRoutes(gs []NameserverGroup) (routes, map[netip.AddrPort]string, []string) {
	var rt routes
	var problems []string
	probes := map[netip.AddrPort]string{}
	byDomain := map[string]int{}
	for i, g := range gs {
		if len(g.Servers) == 0 {
			continue
		}
		if g.Primary {
			rt.primary = appendNew(rt.primary, g.Servers...)
			for _, s := range g.Servers {
				probes[s] = "."
			}
			continue
		}
		if len(g.Domains) == 0 {
			problems = append(problems, fmt.Sprintf("group %d: neither primary nor with match domains", i))
			continue
		}
		for _, d := range g.Domains {
			name := dns.CanonicalName(d)
			if _, ok := dns.IsDomainName(name); !ok || name == "." {
				problems = append(problems, fmt.Sprintf("group %d: match domain %q", i, d))
				continue
			}
			j, ok := byDomain[name]
			if !ok {
				j = len(rt.match)
				byDomain[name] = j
				rt.match = append(rt.match, matchRoute{domain: name})
			}
			rt.match[j].servers = appendNew(rt.match[j].servers, g.Servers...)
			for _, s := range g.Servers {
				if _, ok := probes[s]; !ok {
					probes[s] = name
				}
			}
		}
	}
	slices.SortStableFunc(rt.match, func(a, b matchRoute) int { return dns.CountLabel(b.domain) - dns.CountLabel(a.domain) })
	return rt, probes, problems
}

func appendNew(to []netip.AddrPort, aps ...netip.AddrPort) []netip.AddrPort {
	for _, ap := range aps {
		if !slices.Contains(to, ap) {
			to = append(to, ap)
		}
	}
	return to
}

// serversFor are the servers for name (canonical), host being the host's
// original servers.
func (rt routes) serversFor(name string, host []netip.AddrPort) []netip.AddrPort {
	for _, m := range rt.match {
		if dns.IsSubDomain(m.domain, name) {
			return m.servers
		}
	}
	if rt.primary != nil {
		return rt.primary
	}
	return host
}

var errNoUpstream = errors.New("no upstream DNS server")

// forward asks servers in turn, skipping those out of rotation while
// another is in (they are asked last, when every other failed), and
// moving on after a timeout, SERVFAIL or REFUSED; the answer is SERVFAIL
// when none gave a usable one. The reply carries q's ID and question and
// only the records that answer it (scrub).
func (r *Resolver) forward(ctx context.Context, q *dns.Msg, servers []netip.AddrPort, tcp bool) *dns.Msg {
	uq := q.Copy()
	uq.Id = dns.Id() // the client's ID must not reach the network
	uq.RecursionDesired = true
	clientOpt := q.IsEdns0()
	if o := uq.IsEdns0(); o != nil {
		o.SetUDPSize(upstreamUDPSize)
	} else {
		uq.SetEdns0(upstreamUDPSize, false)
	}

	var up, down []netip.AddrPort
	for _, s := range servers {
		switch {
		case s == r.addr:
			// never to ourselves
		case r.health.isDown(s):
			down = append(down, s)
		default:
			up = append(up, s)
		}
	}
	name := dns.CanonicalName(q.Question[0].Name)
	err := errNoUpstream
	for _, s := range append(up, down...) {
		if ctx.Err() != nil {
			break
		}
		var m *dns.Msg
		m, err = r.exchange(ctx, uq, s, tcp)
		var out bool
		switch {
		case err != nil:
			if ctx.Err() != nil {
				break // our own cancellation says nothing about s
			}
			out = r.health.failed(s)
		case m.Rcode == dns.RcodeRefused:
			err = fmt.Errorf("%s: REFUSED", s)
			out = r.health.failed(s)
		case m.Rcode == dns.RcodeServerFailure:
			// Often the name's fault, not the server's: a client asking
			// for a broken name again and again must not take a healthy
			// server out of rotation, so only distinct names count.
			err = fmt.Errorf("%s: SERVFAIL", s)
			out = r.health.servfail(s, name)
		}
		if out {
			r.log.Warn("DNS server out of rotation until it answers again", "server", s, "err", err)
		}
		if err != nil {
			continue
		}
		r.health.answered(s)
		m = scrub(q.Question[0], m)
		m.Id = q.Id
		m.Question = []dns.Question{q.Question[0]}
		if clientOpt == nil {
			stripOpt(m)
		}
		return m
	}
	r.log.Debug("DNS forward failed", "name", q.Question[0].Name, "err", err)
	m := new(dns.Msg)
	m.SetRcode(q, dns.RcodeServerFailure)
	m.RecursionAvailable = true
	return m
}

func stripOpt(m *dns.Msg) {
	m.Extra = slices.DeleteFunc(m.Extra, func(rr dns.RR) bool { return rr.Header().Rrtype == dns.TypeOPT })
}

// maxScrubChain bounds the CNAME/DNAME chain scrub follows.
const maxScrubChain = 16

// scrub keeps of an upstream answer only what answers qu, so that a
// server (or whoever spoofs it) cannot plant records for other names in
// the cache or the client: the answer records on qu's CNAME/DNAME chain
// (with their signatures), in the authority section only the SOA of a
// negative answer (its negative TTL), and in the additional section only
// the OPT record.
func scrub(qu dns.Question, m *dns.Msg) *dns.Msg {
	chain := map[string]bool{dns.CanonicalName(qu.Name): true}
	last := dns.CanonicalName(qu.Name)
	keep := make([]bool, len(m.Answer))
	for range maxScrubChain {
		grew := false
		for i, rr := range m.Answer {
			if keep[i] {
				continue
			}
			h := rr.Header()
			owner := dns.CanonicalName(h.Name)
			if h.Class != qu.Qclass && qu.Qclass != dns.ClassANY {
				continue
			}
			switch v := rr.(type) {
			case *dns.CNAME:
				if chain[owner] {
					keep[i], grew = true, true
					last = dns.CanonicalName(v.Target)
					chain[last] = true
				}
			case *dns.DNAME:
				// The synthesised CNAME that follows carries the chain on.
				for n := range chain {
					if dns.IsSubDomain(owner, n) && n != owner {
						keep[i], grew = true, true
						break
					}
				}
			default:
				keep[i] = chain[owner] && (h.Rrtype == qu.Qtype || qu.Qtype == dns.TypeANY || h.Rrtype == dns.TypeRRSIG)
			}
		}
		if !grew {
			break
		}
	}
	out := m.Copy()
	out.Answer = nil
	positive := false
	for i, rr := range m.Answer {
		if keep[i] {
			out.Answer = append(out.Answer, rr)
			if t := rr.Header().Rrtype; t == qu.Qtype || qu.Qtype == dns.TypeANY {
				positive = true
			}
		}
	}
	out.Ns = nil
	if !positive || m.Rcode == dns.RcodeNameError {
		for _, rr := range m.Ns {
			if soa, ok := rr.(*dns.SOA); ok && dns.IsSubDomain(dns.CanonicalName(soa.Hdr.Name), last) {
				out.Ns = append(out.Ns, soa)
				break
			}
		}
	}
	out.Extra = nil
	if o := m.IsEdns0(); o != nil {
		out.Extra = []dns.RR{o}
	}
	return out
}

// exchange asks one server, over TCP when tcp is set or the UDP answer
// came truncated, and checks the answer is to the question asked. It
// returns as soon as ctx ends (miekg/dns only honours its deadline).
func (r *Resolver) exchange(ctx context.Context, q *dns.Msg, s netip.AddrPort, tcp bool) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: r.timeout, UDPSize: upstreamUDPSize}
	if tcp {
		c.Net = "tcp"
	}
	m, err := exchangeOnce(ctx, c, q, s)
	if err == nil && m.Truncated && !tcp {
		c.Net = "tcp"
		m, err = exchangeOnce(ctx, c, q, s)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	want := q.Question[0]
	if len(m.Question) != 1 || dns.CanonicalName(m.Question[0].Name) != dns.CanonicalName(want.Name) ||
		m.Question[0].Qtype != want.Qtype || m.Question[0].Qclass != want.Qclass {
		return nil, fmt.Errorf("%s answered another question", s)
	}
	return m, nil
}

// exchangeOnce is one exchange over c's network whose socket is closed
// off when ctx ends.
func exchangeOnce(ctx context.Context, c *dns.Client, q *dns.Msg, s netip.AddrPort) (*dns.Msg, error) {
	conn, err := c.DialContext(ctx, s.String())
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Now()) })
	defer stop()
	m, _, err := c.ExchangeWithConnContext(ctx, q, conn)
	if err != nil && ctx.Err() != nil {
		return nil, fmt.Errorf("%w (%w)", ctx.Err(), err)
	}
	return m, err
}
