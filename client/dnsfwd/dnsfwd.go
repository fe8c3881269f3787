// Package dnsfwd is a routing peer's DNS forwarder, as NetBird's routing
// peers run it for domain network resources: on its overlay address it
// answers, for the peers of the mesh, only the names of the domain routes
// this peer serves (a wildcard "*.example.com" covers example.com and every
// name under it; anything else is REFUSED), resolving them with the host's
// own resolver, and it remembers every address it answered, per route, for
// a while, so that the route firewall lets traffic through to exactly
// those addresses (policies keep working for domain resources).
//
// Everything learned is capped (addresses per name, names per route,
// addresses overall) and expires; the forwarder does not touch the
// firewall itself: the owner reads Learned after OnChange.
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
	// DefaultMaxNames caps the names remembered per route.
	DefaultMaxNames = 256
	// DefaultMaxTotal caps the addresses remembered overall.
	DefaultMaxTotal = 4096
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
}

// Key is the key of a route with these domains, as Route.Key: domain
// routes with the same domains share their addresses.
func Key(domains []string) string {
	ds := make([]string, 0, len(domains))
	for _, d := range domains {
		ds = append(ds, normalize(d))
	}
	slices.Sort(ds)
	return strings.Join(slices.Compact(ds), ",")
}

func normalize(d string) string { return strings.TrimSuffix(strings.ToLower(d), ".") }

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
	// Hold is DefaultHold; MaxPerName, MaxNames and MaxTotal the caps.
	Hold                                        time.Duration
	MaxPerName, MaxNames, MaxTotal, MaxInflight int
	// OnChange is called, outside the forwarder's lock, whenever the
	// learned addresses change (an answer added some, some expired, a
	// route went away).
	OnChange func()
}

// Forwarder answers the names of the routes it is given (see the package
// doc). Answer is usable without listening; Listen serves it.
type Forwarder struct {
	o Options

	mu     sync.Mutex
	routes []Route
	// learned: route key -> name -> address -> expiry.
	learned map[string]map[string]map[netip.Addr]time.Time
	total   int

	inflight chan struct{} // one token per lookup running
	srv      server
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
	if o.MaxTotal <= 0 {
		o.MaxTotal = DefaultMaxTotal
	}
	if o.MaxInflight <= 0 {
		o.MaxInflight = DefaultMaxInflight
	}
	return &Forwarder{o: o, learned: map[string]map[string]map[netip.Addr]time.Time{}, inflight: make(chan struct{}, o.MaxInflight)}
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
			ds = append(ds, normalize(d))
		}
		f.routes = append(f.routes, Route{Key: r.Key, Domains: ds})
		keep[r.Key] = true
	}
	changed := false
	for k, byName := range f.learned {
		if !keep[k] {
			for _, addrs := range byName {
				f.total -= len(addrs)
			}
			delete(f.learned, k)
			changed = true
		}
	}
	f.mu.Unlock()
	return changed
}

func (f *Forwarder) changed() {
	if f.o.OnChange != nil {
		f.o.OnChange()
	}
}

// match returns the keys of the routes whose domains cover name (lower
// case, no trailing dot). f.mu held.
func (f *Forwarder) match(name string) []string {
	var keys []string
	for _, r := range f.routes {
		if slices.ContainsFunc(r.Domains, func(d string) bool { return Covers(d, name) }) {
			keys = append(keys, r.Key)
		}
	}
	return keys
}

// Covers reports whether domain pattern d ("x" or "*.x", lower case, no
// trailing dot) covers name: equal to it, or, for a wildcard, equal to its
// base or under it (NetBird's matching).
func Covers(d, name string) bool {
	if base, ok := strings.CutPrefix(d, "*."); ok {
		return name == base || strings.HasSuffix(name, "."+base)
	}
	return name == d
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
		for _, addrs := range byName {
			for a, until := range addrs {
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
func (f *Forwarder) Sweep() {
	if f.expire() {
		f.changed()
	}
}

// expire drops what has expired; it reports whether anything did.
func (f *Forwarder) expire() bool {
	now := f.o.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	dropped := false
	for k, byName := range f.learned {
		for name, addrs := range byName {
			for a, until := range addrs {
				if !now.Before(until) {
					delete(addrs, a)
					f.total--
					dropped = true
				}
			}
			if len(addrs) == 0 {
				delete(byName, name)
			}
		}
		if len(byName) == 0 {
			delete(f.learned, k)
		}
	}
	return dropped
}

// errFull: a cap keeps the answer's addresses from being allowed.
var errFull = errors.New("too many learned addresses")

// learn records addrs as name's (for every route in keys) until now+Hold.
// f.mu held. It reports whether anything new was learned; errFull when a
// cap left some out.
func (f *Forwarder) learn(keys []string, name string, addrs []netip.Addr) (bool, error) {
	until := f.o.Now().Add(f.o.Hold)
	added := false
	var err error
	for _, k := range keys {
		byName := f.learned[k]
		if byName == nil {
			byName = map[string]map[netip.Addr]time.Time{}
			f.learned[k] = byName
		}
		have := byName[name]
		if have == nil {
			if len(byName) >= f.o.MaxNames {
				err = errFull
				continue
			}
			have = map[netip.Addr]time.Time{}
			byName[name] = have
		}
		for _, a := range addrs {
			if _, ok := have[a]; ok {
				have[a] = until
				continue
			}
			if len(have) >= f.o.MaxPerName || f.total >= f.o.MaxTotal {
				err = errFull
				continue
			}
			have[a] = until
			f.total++
			added = true
		}
		if len(have) == 0 {
			delete(byName, name)
		}
		if len(byName) == 0 {
			delete(f.learned, k)
		}
	}
	return added, err
}

// cached is what name is known to resolve to (for an answer when the
// upstream fails), of the family of qtype. f.mu held.
func (f *Forwarder) cached(keys []string, name string, qtype uint16) []netip.Addr {
	var out []netip.Addr
	now := f.o.Now()
	for _, k := range keys {
		for a, until := range f.learned[k][name] {
			if now.Before(until) && a.Is4() == (qtype == dns.TypeA) {
				out = append(out, a)
			}
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// Answer is the reply to q.
func (f *Forwarder) Answer(ctx context.Context, q *dns.Msg) *dns.Msg {
	m := new(dns.Msg)
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
	name := normalize(qu.Name)
	f.mu.Lock()
	keys := f.match(name)
	f.mu.Unlock()
	if len(keys) == 0 || (qu.Qclass != dns.ClassINET && qu.Qclass != dns.ClassANY) {
		// Not a name of a route this peer serves: no open resolver for
		// the mesh (NetBird's forwarder refuses them too).
		return m.SetRcode(q, dns.RcodeRefused)
	}
	m.SetReply(q)
	m.RecursionAvailable = true
	if qu.Qtype != dns.TypeA && qu.Qtype != dns.TypeAAAA {
		// The name is routed here: other types get NODATA rather than an
		// NXDOMAIN that would poison the name's addresses too.
		return m
	}
	network := "ip4"
	if qu.Qtype == dns.TypeAAAA {
		network = "ip6"
	}
	select {
	case f.inflight <- struct{}{}:
	default:
		f.o.Log.Debug("DNS forwarder: too many lookups at once", "name", name, "max", f.o.MaxInflight)
		m.Rcode = dns.RcodeServerFailure
		return m
	}
	lctx, cancel := context.WithTimeout(ctx, lookupTimeout)
	addrs, err := f.o.Lookup(lctx, network, name)
	cancel()
	<-f.inflight
	if err != nil {
		var de *net.DNSError
		if errors.As(err, &de) && de.IsNotFound {
			m.Rcode = dns.RcodeNameError
			return m
		}
		f.mu.Lock()
		addrs = f.cached(keys, name, qu.Qtype)
		f.mu.Unlock()
		if len(addrs) == 0 {
			f.o.Log.Warn("DNS forwarder: resolve a routed name", "name", name, "err", err)
			m.Rcode = dns.RcodeServerFailure
			return m
		}
		f.o.Log.Debug("DNS forwarder: upstream failed, answering what the name had", "name", name, "err", err)
	}
	addrs = usable(addrs, qu.Qtype, f.o.MaxPerName)
	f.mu.Lock()
	added, err := f.learn(keys, name, addrs)
	f.mu.Unlock()
	if err != nil {
		// Answering addresses the route firewall will not let through
		// would only make the client's connections hang.
		f.o.Log.Warn("DNS forwarder: name not answered, a cap on learned addresses is reached", "name", name,
			"max_per_name", f.o.MaxPerName, "max_names", f.o.MaxNames, "max_total", f.o.MaxTotal)
		m.Rcode = dns.RcodeServerFailure
		if added {
			f.changed()
		}
		return m
	}
	if added {
		// Before the answer leaves: the client's first packet must find
		// the firewall open.
		f.changed()
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
