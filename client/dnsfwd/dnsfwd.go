// Package dnsfwd is a routing peer's DNS forwarder, as NetBird's routing
// peers run it for domain network resources: on its overlay address it
// answers, for the peers of the mesh, only the names of the domain routes
// this peer serves (a wildcard "*.example.com" covers example.com and every
// name under it; anything else is REFUSED), resolving them with the host's
// own resolver, and it remembers every address it answered, per route, for
// a while, so that the route firewall lets traffic through to exactly
// those addresses (policies keep working for domain resources).
//
// Only the sources a route's policy lets reach the route may ask about its
// names (Route.Sources); everything learned is capped (addresses per name,
// names per route, the least recently asked name giving way), each source
// may add new names only at a bounded rate, and everything expires; the
// forwarder does not touch the firewall itself: the owner reads Learned
// after OnChange.
package dnsfwd

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/internal/dnsname"
	"github.com/wiremesh/wiremesh/internal/ratelimit"
)

// Defaults of Options.
const (
	// AnswerTTL is the TTL of every address record the forwarder answers
	// (NetBird's routing peers answer 60 s): clients ask again about that
	// often, which keeps the addresses allowed here fresh.
	AnswerTTL = 60
	// DefaultHold is how long an answered address stays allowed after the
	// last answer that named it: longer than AnswerTTL, so that a client
	// that keeps an address a little past its TTL is not cut off.
	DefaultHold = 10 * time.Minute
	// DefaultMaxPerName caps the addresses kept (and answered) per name.
	DefaultMaxPerName = 32
	// DefaultMaxNames caps the names remembered per route; a new name
	// past it takes the place of the one asked about least recently.
	DefaultMaxNames = 256
	// DefaultSourceBurst new names may be added by one source at once,
	// then one more per DefaultSourceRefill: one peer cannot push every
	// name the others use out of a route (MaxNames).
	DefaultSourceBurst  = 64
	DefaultSourceRefill = 5 * time.Second
	// DefaultMaxInflight caps the lookups running at once: peers cannot
	// make the forwarder hold unbounded goroutines and sockets.
	DefaultMaxInflight = 64
	// lookupTimeout bounds one upstream resolution.
	lookupTimeout = 5 * time.Second
)

// Route is one domain route this peer serves.
type Route struct {
	// Key identifies the route's learned addresses (Key of its domains).
	Key string
	// Domains are lower-case names without the trailing dot; "*.x" covers
	// x and every name under it.
	Domains []string
	// Sources may ask about the route's names (the sources its route
	// firewall rules accept, within the overlay); none: nobody may.
	Sources []netip.Prefix
}

// Key is the key of a route with these domains, as Route.Key: domain
// routes with the same domains share their addresses.
func Key(domains []string) string {
	ds := make([]string, 0, len(domains))
	for _, d := range domains {
		ds = append(ds, dnsname.Normalize(d))
	}
	slices.Sort(ds)
	return strings.Join(slices.Compact(ds), ",")
}

// LookupFunc resolves host to addresses of network ("ip4" or "ip6"), as
// net.Resolver.LookupNetIP.
type LookupFunc func(ctx context.Context, network, host string) ([]netip.Addr, error)

// Options configure a Forwarder; zero fields take the defaults.
type Options struct {
	Log *slog.Logger
	// Now is the clock of expiries (time.Now).
	Now func() time.Time
	// Lookup resolves names with the host's resolver
	// (net.DefaultResolver.LookupNetIP).
	Lookup LookupFunc
	// Hold is DefaultHold; MaxPerName, MaxNames and MaxInflight the caps;
	// SourceBurst and SourceRefill the rate of new names per source.
	Hold                              time.Duration
	MaxPerName, MaxNames, MaxInflight int
	SourceBurst                       int
	SourceRefill                      time.Duration
	// OnChange is called, outside the forwarder's lock, whenever the
	// learned addresses change (an answer added some, some expired, a
	// route went away); ctx ends with Close, so that an answer waiting
	// for the owner to apply the change does not hold Close up.
	OnChange func(ctx context.Context)
}

// Forwarder answers the names of the routes it is given (see the package
// doc). Answer is usable without listening; Listen serves it.
type Forwarder struct {
	o Options

	mu     sync.Mutex
	routes []Route
	// learned: route key -> name -> what it resolved to.
	learned map[string]map[string]*entry

	inflight chan struct{}      // one token per lookup running
	newNames *ratelimit.Limiter // new names per source
	srv      server
}

// entry is what one name of a route resolved to: address -> expiry, and
// when it was last asked about (the least recent gives way at MaxNames).
type entry struct {
	addrs map[netip.Addr]time.Time
	used  time.Time
}

// New returns a forwarder serving no route yet.
func New(o Options) *Forwarder {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Lookup == nil {
		o.Lookup = net.DefaultResolver.LookupNetIP
	}
	if o.Hold <= 0 {
		o.Hold = DefaultHold
	}
	if o.MaxPerName <= 0 {
		o.MaxPerName = DefaultMaxPerName
	}
	if o.MaxNames <= 0 {
		o.MaxNames = DefaultMaxNames
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	if o.SourceBurst <= 0 {
		o.SourceBurst = DefaultSourceBurst
	}
	if o.SourceRefill <= 0 {
		o.SourceRefill = DefaultSourceRefill
	}
	return &Forwarder{o: o, learned: map[string]map[string]*entry{}, inflight: make(chan struct{}, o.MaxInflight),
		newNames: ratelimit.New(ratelimit.Options{Burst: o.SourceBurst, Refill: o.SourceRefill, Now: o.Now})}
}

// SetRoutes replaces the routes served. What was learned for a route no
// longer served is forgotten; it reports whether anything was (it does
// not call OnChange: the caller is applying the change already).
func (f *Forwarder) SetRoutes(rs []Route) bool {
	f.mu.Lock()
	keep := map[string]bool{}
	f.routes = nil
	for _, r := range rs {
		ds := make([]string, 0, len(r.Domains))
		for _, d := range r.Domains {
			ds = append(ds, dnsname.Normalize(d))
		}
		f.routes = append(f.routes, Route{Key: r.Key, Domains: ds, Sources: slices.Clone(r.Sources)})
		keep[r.Key] = true
	}
	changed := false
	for k := range f.learned {
		if !keep[k] {
			delete(f.learned, k)
			changed = true
		}
	}
	f.mu.Unlock()
	return changed
}

func (f *Forwarder) changed(ctx context.Context) {
	if f.o.OnChange != nil {
		f.o.OnChange(ctx)
	}
}

// match returns the keys of the routes whose domains cover name (lower
// case, no trailing dot) and that src may ask about. f.mu held.
func (f *Forwarder) match(src netip.Addr, name string) []string {
	var keys []string
	for _, r := range f.routes {
		if slices.ContainsFunc(r.Domains, func(d string) bool { return dnsname.Covers(d, name) }) &&
			slices.ContainsFunc(r.Sources, func(p netip.Prefix) bool { return p.Contains(src) }) {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

// Learned is, per route key, the addresses currently allowed (sorted,
// each a single-address prefix), expired ones left out. It never calls
// OnChange, so OnChange may call it.
func (f *Forwarder) Learned() map[string][]netip.Prefix {
	now := f.o.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]netip.Prefix, len(f.learned))
	for k, byName := range f.learned {
		var ps []netip.Prefix
		for _, e := range byName {
			for a, until := range e.addrs {
				if now.Before(until) {
					ps = append(ps, netip.PrefixFrom(a, a.BitLen()))
				}
			}
		}
		if len(ps) == 0 {
			continue
		}
		slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		out[k] = slices.Compact(ps)
	}
	return out
}

// Sweep forgets what has expired and calls OnChange when anything did
// (Listen runs it every sweepEvery).
func (f *Forwarder) Sweep() { f.sweep(context.Background()) }

func (f *Forwarder) sweep(ctx context.Context) {
	if f.expire() {
		f.changed(ctx)
	}
}

// expire drops what has expired; it reports whether anything did.
func (f *Forwarder) expire() bool {
	now := f.o.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	dropped := false
	for k, byName := range f.learned {
		for name, e := range byName {
			for a, until := range e.addrs {
				if !now.Before(until) {
					delete(e.addrs, a)
					dropped = true
				}
			}
			if len(e.addrs) == 0 {
				delete(byName, name)
			}
		}
		if len(byName) == 0 {
			delete(f.learned, k)
		}
	}
	return dropped
}

// learn records addrs as name's (for every route in keys) until now+Hold;
// a new name past MaxNames takes the place of the one asked about least
// recently. f.mu held. It reports whether the addresses allowed changed
// and whether name was new to any route.
func (f *Forwarder) learn(keys []string, name string, addrs []netip.Addr) (changed, isNew bool) {
	now := f.o.Now()
	until := now.Add(f.o.Hold)
	for _, k := range keys {
		byName := f.learned[k]
		if byName == nil {
			byName = map[string]*entry{}
			f.learned[k] = byName
		}
		e := byName[name]
		if e == nil {
			if len(addrs) == 0 {
				continue
			}
			if len(byName) >= f.o.MaxNames {
				f.evictLRU(byName)
				changed = true
			}
			e = &entry{addrs: map[netip.Addr]time.Time{}}
			byName[name] = e
			isNew = true
		}
		e.used = now
		for _, a := range addrs {
			if _, ok := e.addrs[a]; !ok {
				if len(e.addrs) >= f.o.MaxPerName {
					continue
				}
				changed = true
			}
			e.addrs[a] = until
		}
	}
	return changed, isNew
}

// evictLRU forgets the name of byName asked about least recently. f.mu
// held.
func (f *Forwarder) evictLRU(byName map[string]*entry) {
	var oldest string
	var at time.Time
	for n, e := range byName {
		if oldest == "" || e.used.Before(at) || (e.used.Equal(at) && n < oldest) {
			oldest, at = n, e.used
		}
	}
	f.o.Log.Debug("DNS forwarder: a route's names are at their cap; the least recently asked goes", "name", oldest, "max_names", f.o.MaxNames)
	delete(byName, oldest)
}

// known reports whether name is learned for any route of keys. f.mu held.
func (f *Forwarder) known(keys []string, name string) bool {
	return slices.ContainsFunc(keys, func(k string) bool { return f.learned[k][name] != nil })
}

// cached is what name is known to resolve to (for an answer when the
// upstream fails), of the family of qtype. f.mu held.
func (f *Forwarder) cached(keys []string, name string, qtype uint16) []netip.Addr {
	var out []netip.Addr
	now := f.o.Now()
	for _, k := range keys {
		e := f.learned[k][name]
		if e == nil {
			continue
		}
		for a, until := range e.addrs {
			if now.Before(until) && a.Is4() == (qtype == dns.TypeA) {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// Answer is the reply to q from src (a peer's overlay address): names of
// the routes src may reach are answered, everything else is REFUSED.
func (f *Forwarder) Answer(ctx context.Context, src netip.Addr, q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
	m.Compress = true // 32 records of one name: no amplification
	switch {
	case q.Response || len(q.Question) != 1:
		return m.SetRcodeFormatError(q)
	case q.Opcode != dns.OpcodeQuery:
		return m.SetRcode(q, dns.RcodeNotImplemented)
	}
	qu := q.Question[0]
	if _, ok := dns.IsDomainName(qu.Name); !ok {
		return m.SetRcodeFormatError(q)
	}
	name := dnsname.Normalize(qu.Name)
	src = src.Unmap()
	f.mu.Lock()
	keys := f.match(src, name)
	f.mu.Unlock()
	if len(keys) == 0 || (qu.Qclass != dns.ClassINET && qu.Qclass != dns.ClassANY) {
		// Not a name of a route this peer serves to src: no open
		// resolver for the mesh (NetBird's forwarder refuses them too),
		// and no look into a resource's DNS without its policy.
		return m.SetRcode(q, dns.RcodeRefused)
	}
	m.SetReply(q)
	m.RecursionAvailable = true
	if qu.Qtype != dns.TypeA && qu.Qtype != dns.TypeAAAA {
		// The name is routed here: other types get NODATA rather than an
		// NXDOMAIN that would poison the name's addresses too.
		return m
	}
	select {
	case f.inflight <- struct{}{}:
	default:
		f.o.Log.Debug("DNS forwarder: too many lookups at once", "name", name, "max", f.o.MaxInflight)
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	addrs, rcode, err := f.resolve(ctx, name, qu.Qtype)
	<-f.inflight
	if err != nil {
		f.mu.Lock()
		addrs = f.cached(keys, name, qu.Qtype)
		f.mu.Unlock()
		if len(addrs) == 0 {
			f.o.Log.Warn("DNS forwarder: resolve a routed name", "name", name, "err", err)
			m.Rcode = dns.RcodeServerFailure
			return m
		}
		f.o.Log.Debug("DNS forwarder: upstream failed, answering what the name had", "name", name, "err", err)
	} else if rcode != dns.RcodeSuccess {
		m.Rcode = rcode
		return m
	}
	addrs = usable(addrs, qu.Qtype, f.o.MaxPerName)
	if len(addrs) == 0 {
		return m // NODATA
	}
	f.mu.Lock()
	var res *ratelimit.Reservation
	if !f.known(keys, name) {
		// A name new to the routes costs src one of its new names.
		var err error
		if res, err = f.newNames.Reserve(ratelimit.Key{Src: src}); err != nil {
			f.mu.Unlock()
			f.o.Log.Debug("DNS forwarder: a peer asks about too many new names", "src", src, "name", name, "err", err)
			m.Rcode = dns.RcodeServerFailure
			return m
		}
	}
	changed, isNew := f.learn(keys, name, addrs)
	f.mu.Unlock()
	if isNew {
		res.Fail() // spent
	} else {
		res.Success() // nil-safe: a known name costs nothing
	}
	if changed {
		// Before the answer leaves: the client's first packet must find
		// the firewall open.
		f.changed(ctx)
	}
	hdr := dns.RR_Header{Name: qu.Name, Rrtype: qu.Qtype, Class: dns.ClassINET, Ttl: AnswerTTL}
	for _, a := range addrs {
		if a.Is4() {
			m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
		} else {
			m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
		}
	}
	return m
}

// resolve looks name up for qtype's family. A name that does not exist in
// that family (Go's resolver reports NXDOMAIN and NODATA alike as
// IsNotFound) is NXDOMAIN only when the other family has no address
// either: an IPv4-only name's AAAA question gets NODATA, or resolvers
// would cache the whole name as nonexistent (RFC 8020) and musl's
// getaddrinfo would fail outright. err: the upstream failed.
func (f *Forwarder) resolve(ctx context.Context, name string, qtype uint16) (_ []netip.Addr, rcode int, _ error) {
	network, other := "ip4", "ip6"
	if qtype == dns.TypeAAAA {
		network, other = "ip6", "ip4"
	}
	lookup := func(network string) ([]netip.Addr, error) {
		lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
		defer cancel()
		return f.o.Lookup(lctx, network, name)
	}
	addrs, err := lookup(network)
	if err == nil {
		return addrs, dns.RcodeSuccess, nil
	}
	if !notFound(err) {
		return nil, 0, err
	}
	oaddrs, oerr := lookup(other)
	if oerr == nil && len(oaddrs) > 0 {
		return nil, dns.RcodeSuccess, nil // NODATA
	}
	if oerr != nil && !notFound(oerr) {
		// Unknown whether the name exists: NODATA poisons less.
		return nil, dns.RcodeSuccess, nil
	}
	return nil, dns.RcodeNameError, nil
}

func notFound(err error) bool {
	var de *net.DNSError
	return errors.As(err, &de) && de.IsNotFound
}

// usable keeps the addresses of qtype's family that may be routed (no
// unspecified, loopback, link-local or multicast address), sorted, at
// most max.
func usable(addrs []netip.Addr, qtype uint16, max int) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if a.Is4() != (qtype == dns.TypeA) || a.IsUnspecified() || a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsMulticast() {
			continue
		}
		out = append(out, a)
	}
	slices.SortFunc(out, netip.Addr.Compare)
	out = slices.Compact(out)
	if len(out) > max {
		out = out[:max]
	}
	return out
}
