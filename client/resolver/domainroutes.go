package resolver

import (
	"context"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/internal/dnsname"
)

// DomainRoutes sends the names of domain routes that their routing peers
// resolve (NetBird's routing-peer DNS resolution) to the DNS forwarder of
// the routing peer in use, and learns what they resolve to before the
// client sees the answer, so that the routes to those addresses are in
// place for its first packet.
type DomainRoutes interface {
	// Upstream is the DNS forwarder to ask about name (lower case, no
	// final dot). ok=false: no such route covers name. A zero AddrPort
	// with ok: a route covers it but has no routing peer now.
	Upstream(name string) (fwd netip.AddrPort, ok bool)
	// Learned gets the addresses an answer about name carried.
	Learned(ctx context.Context, name string, addrs []netip.Addr)
}

// SetDomainRoutes sets where the names of domain routes go (nil: they are
// resolved as any other name) and the routes' domains, which the host
// must send here ("*.x" as x).
func (r *Resolver) SetDomainRoutes(dr DomainRoutes, domains []string) {
	var names []string
	for _, d := range domains {
		d = dnsname.Base(d)
		if CheckName(d, false) {
			names = append(names, d)
		}
	}
	slices.Sort(names)
	names = slices.Compact(names)
	r.mu.Lock()
	same := slices.Equal(names, r.routedNames) && (dr == nil) == (r.domainRoutes == nil)
	r.domainRoutes, r.routedNames = dr, names
	r.mu.Unlock()
	if !same {
		r.cache.flush()
		r.changed()
	}
}

// withRouted adds the routed domains to hc (as match domains only).
func withRouted(hc HostConfig, names []string) HostConfig {
	if len(names) == 0 {
		return hc
	}
	have := map[string]bool{}
	for _, d := range hc.Domains {
		have[d.Name] = true
	}
	for _, n := range names {
		if !have[n] {
			hc.Domains = append(hc.Domains, HostDomain{Name: n})
		}
	}
	slices.SortFunc(hc.Domains, func(a, b HostDomain) int { return strings.Compare(a.Name, b.Name) })
	return hc
}

// fromRoutingPeer answers q through the routing peer's DNS forwarder when
// a domain route covers its name; ok=false when none does. The answer is
// not cached: every answer must reach Learned.
func (r *Resolver) fromRoutingPeer(ctx context.Context, q *dns.Msg, tcp bool) (*dns.Msg, bool) {
	qu := q.Question[0]
	r.mu.RLock()
	dr := r.domainRoutes
	pinned := r.pinnedLocked(qu.Name)
	r.mu.RUnlock()
	if dr == nil || pinned || (qu.Qclass != dns.ClassINET && qu.Qclass != dns.ClassANY) {
		return nil, false
	}
	name := dnsname.Normalize(qu.Name)
	fwd, ok := dr.Upstream(name)
	if !ok {
		return nil, false
	}
	if !fwd.IsValid() {
		m := new(dns.Msg)
		m.SetRcode(q, dns.RcodeServerFailure)
		m.RecursionAvailable = true
		r.log.Debug("DNS: a domain route covers the name but has no routing peer now", "name", name)
		return m, true
	}
	m := r.forward(ctx, q, []netip.AddrPort{fwd}, tcp)
	if qu.Qtype == dns.TypeA || qu.Qtype == dns.TypeAAAA {
		var addrs []netip.Addr
		for _, rr := range m.Answer {
			switch v := rr.(type) {
			case *dns.A:
				if a, ok := netip.AddrFromSlice(v.A); ok {
					addrs = append(addrs, a.Unmap())
				}
			case *dns.AAAA:
				if a, ok := netip.AddrFromSlice(v.AAAA); ok {
					addrs = append(addrs, a)
				}
			}
		}
		if len(addrs) > 0 {
			dr.Learned(ctx, name, addrs)
		}
	}
	return m, true
}
