package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"

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
// another is in, and moving on after a timeout, SERVFAIL or REFUSED; the
// answer is SERVFAIL when none gave a usable one. The reply carries q's ID
// and question.
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
	if len(up) == 0 {
		up = down // all out of rotation: still better than no answer
	}
	err := errNoUpstream
	for _, s := range up {
		if ctx.Err() != nil {
			break
		}
		var m *dns.Msg
		m, err = r.exchange(ctx, uq, s, tcp)
		if err == nil && (m.Rcode == dns.RcodeServerFailure || m.Rcode == dns.RcodeRefused) {
			err = fmt.Errorf("%s: %s", s, dns.RcodeToString[m.Rcode])
		}
		if err != nil {
			if r.health.failed(s) {
				r.log.Warn("DNS server out of rotation until it answers again", "server", s, "err", err)
			}
			continue
		}
		r.health.answered(s)
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

// exchange asks one server, over TCP when tcp is set or the UDP answer
// came truncated, and checks the answer is to the question asked.
func (r *Resolver) exchange(ctx context.Context, q *dns.Msg, s netip.AddrPort, tcp bool) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: r.timeout, UDPSize: upstreamUDPSize}
	if tcp {
		c.Net = "tcp"
	}
	m, _, err := c.ExchangeContext(ctx, q, s.String())
	if err == nil && m.Truncated && !tcp {
		c.Net = "tcp"
		m, _, err = c.ExchangeContext(ctx, q, s.String())
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s, err)
	}
	if len(m.Question) != 1 || dns.CanonicalName(m.Question[0].Name) != dns.CanonicalName(q.Question[0].Name) || m.Question[0].Qtype != q.Question[0].Qtype {
		return nil, fmt.Errorf("%s answered another question", s)
	}
	return m, nil
}
