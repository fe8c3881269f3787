// Package resolver is the agent's DNS service, with NetBird's DNSConfig
// semantics: a server on the peer's overlay address that answers the zones
// management sends (the peers' zone and custom zones: A, AAAA and CNAME
// records, authoritatively), forwards the names under a nameserver group's
// match domains to that group (split DNS, with failover and health
// checks), and everything else to the primary group or, without one, to
// the host's original name servers; forwarded answers are cached for their
// TTL. It also says what the host's resolver must be told (Config), but
// does not tell it: host integration lives elsewhere.
package resolver

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// defaultTimeout bounds one question to one upstream server.
const defaultTimeout = 2 * time.Second

// serverUDPSize is the EDNS0 buffer size the resolver advertises to its
// own clients.
const serverUDPSize = 1232

// Options configure a Resolver; zero fields take the defaults.
type Options struct {
	Log *slog.Logger
	// Now is the clock of the cache and the health checks.
	Now func() time.Time
	// Timeout bounds one question to one upstream server.
	Timeout time.Duration
	// ProbeInterval is how often servers out of rotation are looked at.
	ProbeInterval time.Duration
	// CacheEntries and CacheBytes bound the cache.
	CacheEntries, CacheBytes int
	// PerSource and Total cap the questions in flight, per client
	// address and altogether.
	PerSource, Total int
	// OnChange, when set, is called with the new HostConfig whenever
	// Apply, SetUpstreams or Listen changes it, from the caller's
	// goroutine after the change took effect.
	OnChange func(HostConfig)
	// Overlay is the mesh's network: UDP questions from outside it that
	// do not come from this host either are dropped, since their source
	// may be spoofed to aim the answers at someone else (amplification).
	// TCP questions need no such check (the handshake proves the source).
	Overlay netip.Prefix
	// LocalAddrs lists this host's own addresses (default: the
	// interfaces' addresses); loopback is always local.
	LocalAddrs func() ([]netip.Addr, error)
}

// Resolver answers DNS questions on one address, over UDP and TCP.
type Resolver struct {
	log      *slog.Logger
	timeout  time.Duration
	cache    *cache
	health   *health
	limit    *limiter
	sources  *sources
	flights  flights
	onChange func(HostConfig)

	mu         sync.RWMutex
	zones      zoneTable
	routes     routes
	cfg        Config
	host       []netip.AddrPort          // the host's original servers
	groupProbe map[netip.AddrPort]string // probe names of the groups' servers
	hc         HostConfig
	// pinned names always go to the host's original servers (see Pin).
	pinned map[string]bool
	// domainRoutes and routedNames: see SetDomainRoutes.
	domainRoutes DomainRoutes
	routedNames  []string

	addr     netip.AddrPort
	udp, tcp *dns.Server
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	close    sync.Once
}

// New returns a resolver that serves nothing yet: Answer works, Listen
// starts the servers. Its health prober runs until Close.
func New(o Options) *Resolver {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	if o.ProbeInterval <= 0 {
		o.ProbeInterval = defaultProbeInterval
	}
	if o.CacheEntries <= 0 {
		o.CacheEntries = defaultCacheEntries
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = defaultCacheBytes
	}
	if o.PerSource <= 0 {
		o.PerSource = defaultPerSource
	}
	if o.Total <= 0 {
		o.Total = defaultTotal
	}
	if o.LocalAddrs == nil {
		o.LocalAddrs = interfaceAddrs
	}
	r := &Resolver{
		log:      o.Log,
		timeout:  o.Timeout,
		cache:    newCache(o.Now, o.CacheEntries, o.CacheBytes),
		health:   newHealth(o.Now),
		limit:    newLimiter(o.PerSource, o.Total),
		sources:  newSources(o.Overlay, o.LocalAddrs, o.Now),
		onChange: o.OnChange,
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.probeLoop(ctx, o.ProbeInterval)
	}()
	return r
}

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
	r.mu.Lock()
	r.addr = addr
	r.mu.Unlock()
	r.udp = &dns.Server{PacketConn: pc, Handler: r, UDPSize: serverUDPSize}
	r.tcp = &dns.Server{Listener: ln, Handler: r, ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, IdleTimeout: func() time.Duration { return 10 * time.Second }}
	for _, s := range []*dns.Server{r.udp, r.tcp} {
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			if err := s.ActivateAndServe(); err != nil {
				r.log.Debug("DNS resolver stopped", "err", err)
			}
		}()
	}
	r.changed()
	return nil
}

// Addr is where it listens (zero before Listen).
func (r *Resolver) Addr() netip.AddrPort {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.addr
}

// Close stops serving and probing, cancels the questions in flight
// (forwards included) and waits for all of it. It may be called more
// than once.
func (r *Resolver) Close() {
	r.close.Do(func() {
		// Cancel first: the servers' shutdown waits for their handlers.
		r.flights.close()
		r.cancel()
		for _, s := range []*dns.Server{r.udp, r.tcp} {
			if s != nil {
				_ = s.Shutdown()
			}
		}
	})
	r.wg.Wait()
	r.flights.wait()
}

// Pin makes names (host names, any case, final dot optional) always
// resolve through the host's original servers, before any zone, match
// domain or primary group is looked at: the agent's own servers
// (management, signal, relays, STUN/TURN) must stay reachable whatever
// DNS configuration management sends, or a zone or a primary group only
// reachable through the mesh would cut the agent off at its next
// reconnect. Without original servers the names route as any other.
func (r *Resolver) Pin(names []string) {
	pinned := map[string]bool{}
	for _, n := range names {
		if _, ok := dns.IsDomainName(n); ok && n != "" {
			pinned[dns.CanonicalName(n)] = true
		}
	}
	r.mu.Lock()
	same := maps.Equal(pinned, r.pinned)
	r.pinned = pinned
	r.mu.Unlock()
	if !same {
		r.cache.flush()
	}
}

// Config is what the host's resolver must be told now.
func (r *Resolver) Config() HostConfig {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.hc
}

// SetUpstreams sets the host's original servers: where questions go that
// no zone, match domain or primary group takes, tried in order.
func (r *Resolver) SetUpstreams(ups []netip.AddrPort) {
	r.mu.Lock()
	r.host = append([]netip.AddrPort(nil), ups...)
	r.trackLocked()
	r.mu.Unlock()
	r.cache.flush()
}

// Apply replaces the zones and nameserver groups with cfg's. What cannot
// be used (a bad name, a record outside its zone, a group with neither
// match domains nor primary) is left out and reported in the error, which
// wraps ErrSkipped; the rest applies either way.
func (r *Resolver) Apply(cfg Config) error {
	zones, problems := buildZones(cfg.Zones)
	rt, probes, p := buildRoutes(cfg.Groups)
	problems = append(problems, p...)
	r.mu.Lock()
	r.zones, r.routes, r.cfg, r.groupProbe = zones, rt, cfg, probes
	r.trackLocked()
	r.mu.Unlock()
	r.cache.flush()
	r.changed()
	if len(problems) > 0 {
		return fmt.Errorf("%w: %s", ErrSkipped, strings.Join(problems, "; "))
	}
	return nil
}

// trackLocked points the health checks at the servers in use.
func (r *Resolver) trackLocked() {
	probes := map[netip.AddrPort]string{}
	for _, s := range r.host {
		probes[s] = "."
	}
	for s, name := range r.groupProbe {
		probes[s] = name
	}
	r.health.track(probes)
}

// changed recomputes the HostConfig and reports a change.
func (r *Resolver) changed() {
	r.mu.Lock()
	hc := withRouted(hostConfig(r.addr, r.cfg), r.routedNames)
	same := hc.Equal(r.hc)
	r.hc = hc
	r.mu.Unlock()
	if !same && r.onChange != nil {
		r.onChange(hc)
	}
}

// ServeDNS answers one question (dns.Handler). A UDP question from a
// source neither in the overlay nor of this host gets no answer at all.
func (r *Resolver) ServeDNS(w dns.ResponseWriter, q *dns.Msg) {
	var src netip.Addr
	tcp := false
	switch a := w.RemoteAddr().(type) {
	case *net.TCPAddr:
		tcp, src = true, a.AddrPort().Addr().Unmap()
	case *net.UDPAddr:
		src = a.AddrPort().Addr().Unmap()
	}
	if !tcp && !r.sources.allowed(src) {
		r.log.Debug("DNS question dropped: source outside the overlay and not local", "src", src)
		return
	}
	var m *dns.Msg
	if r.limit.acquire(src) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*r.timeout)
		m = r.Answer(ctx, q, tcp)
		cancel()
		r.limit.release(src)
	} else {
		m = new(dns.Msg)
		m.SetRcode(q, dns.RcodeRefused)
	}
	fitReply(q, m, tcp)
	if err := w.WriteMsg(m); err != nil {
		r.log.Debug("DNS reply", "err", err)
	}
}

// fitReply gives m the OPT record q's EDNS0 calls for and, over UDP,
// truncates it (TC set) to what the client can take: 512 bytes without
// EDNS0, its advertised size with it but never more than serverUDPSize,
// so that a small question never buys a large answer over UDP.
func fitReply(q, m *dns.Msg, tcp bool) {
	m.Compress = true
	size := dns.MinMsgSize
	if o := q.IsEdns0(); o != nil {
		size = min(max(int(o.UDPSize()), dns.MinMsgSize), serverUDPSize)
		if mo := m.IsEdns0(); mo != nil {
			mo.SetUDPSize(serverUDPSize)
		} else {
			m.SetEdns0(serverUDPSize, false)
		}
	} else {
		stripOpt(m)
	}
	if !tcp {
		m.Truncate(size)
	}
}

// Answer is the reply to q: from a zone held here, else from the cache,
// else from an upstream server (over TCP when tcp is set or the UDP
// answer was truncated).
func (r *Resolver) Answer(ctx context.Context, q *dns.Msg, tcp bool) *dns.Msg {
	m := new(dns.Msg)
	ctx, done, ok := r.flights.start(ctx)
	if !ok { // closed
		m.SetRcode(q, dns.RcodeRefused)
		return m
	}
	defer done()
	switch {
	case q.Response:
		return m.SetRcodeFormatError(q)
	case q.Opcode != dns.OpcodeQuery:
		m.SetRcode(q, dns.RcodeNotImplemented)
		return m
	case len(q.Question) != 1:
		return m.SetRcodeFormatError(q)
	}
	if o := q.IsEdns0(); o != nil && o.Version() != 0 {
		m.SetRcode(q, dns.RcodeBadVers)
		m.SetEdns0(serverUDPSize, false)
		return m
	}
	qu := q.Question[0]
	if _, ok := dns.IsDomainName(qu.Name); !ok {
		return m.SetRcodeFormatError(q)
	}
	switch qu.Qtype {
	case dns.TypeAXFR, dns.TypeIXFR, dns.TypeMAILA, dns.TypeMAILB:
		m.SetRcode(q, dns.RcodeNotImplemented)
		return m
	}
	r.mu.RLock()
	zones := r.zones
	pinned := r.pinnedLocked(qu.Name)
	r.mu.RUnlock()
	if !pinned && (qu.Qclass == dns.ClassINET || qu.Qclass == dns.ClassANY) {
		if za, ok := zones.lookup(qu.Name, qu.Qtype); ok {
			return r.fromZones(ctx, q, za, tcp)
		}
	}
	return r.resolve(ctx, q, tcp)
}

// fromZones is the reply for what the zones said, the chain completed
// upstream when a CNAME leads out of them.
func (r *Resolver) fromZones(ctx context.Context, q *dns.Msg, za zoneAnswer, tcp bool) *dns.Msg {
	m := new(dns.Msg)
	m.SetReply(q)
	m.RecursionAvailable = true
	m.Authoritative = true
	m.Rcode = za.rcode
	m.Answer, m.Ns = za.answer, za.ns
	if za.external == "" {
		return m
	}
	sub := new(dns.Msg)
	sub.SetQuestion(za.external, q.Question[0].Qtype)
	sub.Question[0].Qclass = q.Question[0].Qclass
	if o := q.IsEdns0(); o != nil {
		sub.SetEdns0(o.UDPSize(), o.Do())
	}
	ext := r.resolve(ctx, sub, tcp)
	// Part of the answer is another server's: not authoritative, and the
	// rcode is the chain's end's (RFC 6604).
	m.Authoritative = false
	m.Rcode = ext.Rcode
	m.Answer = append(m.Answer, ext.Answer...)
	m.Ns = ext.Ns
	return m
}

// resolve answers q from the cache or the servers its name routes to.
func (r *Resolver) resolve(ctx context.Context, q *dns.Msg, tcp bool) *dns.Msg {
	if m, ok := r.fromRoutingPeer(ctx, q, tcp); ok {
		return m
	}
	if m, ok := r.cache.get(q); ok {
		return m
	}
	name := dns.CanonicalName(q.Question[0].Name)
	r.mu.RLock()
	servers := r.routes.serversFor(name, r.host)
	if r.pinnedLocked(name) {
		servers = r.host
	}
	r.mu.RUnlock()
	m := r.forward(ctx, q, servers, tcp)
	r.cache.put(q, m)
	return m
}

// pinnedLocked reports whether name goes to the host's original servers
// whatever the configuration says (Pin).
func (r *Resolver) pinnedLocked(name string) bool {
	return len(r.host) > 0 && r.pinned[dns.CanonicalName(name)]
}

// flights are the questions being answered, so that Close can cancel
// them and wait for them.
type flights struct {
	mu      sync.Mutex
	closed  bool
	next    uint64
	cancels map[uint64]context.CancelFunc
	wg      sync.WaitGroup
}

// start registers a question: its context ends with ctx or at close;
// done must be called when it is answered. False once closed.
func (f *flights) start(ctx context.Context) (context.Context, func(), bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(ctx)
	if f.cancels == nil {
		f.cancels = map[uint64]context.CancelFunc{}
	}
	id := f.next
	f.next++
	f.cancels[id] = cancel
	f.wg.Add(1)
	return ctx, func() {
		f.mu.Lock()
		delete(f.cancels, id)
		f.mu.Unlock()
		cancel()
		f.wg.Done()
	}, true
}

// close refuses new questions and cancels those in flight.
func (f *flights) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for _, cancel := range f.cancels {
		cancel()
	}
}

// wait waits for the questions in flight to be answered (after close:
// no new ones can start, so the wait group is not reused).
func (f *flights) wait() { f.wg.Wait() }
