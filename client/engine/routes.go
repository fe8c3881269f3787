package engine

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/client/routes"
	"github.com/wiremesh/wiremesh/client/wg"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/sockmark"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Network is one network (a NetID) offered by the map, as `netbird
// networks ls` and `netbird status -d` show it.
type Network struct {
	ID          string              // the NetID users select by
	Range       string              // the CIDR, "" for a domain route
	Domains     []string            // a domain route's names
	ResolvedIPs map[string][]string // domain -> the addresses it resolved to
	Selected    bool
	ExitNode    bool
	Peers       []string // the routing peers' FQDNs
	Chosen      string   // FQDN of the routing peer in use, "" if none
}

// RouteSelection is the user's choice of networks, as the daemon persists
// it. The zero value selects every network except exit nodes management
// does not apply by itself.
type RouteSelection struct {
	Selected, Deselected []string
	AllDeselected        bool
}

// routeInterval is how often the routing peers are re-chosen from the
// peers' connection states and the liveness of those in use: with
// routes.FailoverGrace and routes.DefaultLiveness it bounds failover.
const routeInterval = 250 * time.Millisecond

// domainInterval is how often domain routes are resolved again.
const domainInterval = time.Minute

// Networks lists the networks the map offers this peer (its own routes
// excluded), sorted by NetID.
func (e *Engine) Networks() []Network {
	nets := e.routes.Networks()
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]Network, 0, len(nets))
	for _, n := range nets {
		v := Network{ID: n.ID, Domains: n.Domains, Selected: n.Selected, ExitNode: n.ExitNode}
		var ranges []string
		for _, p := range n.Prefixes {
			ranges = append(ranges, p.String())
		}
		v.Range = strings.Join(ranges, ",")
		if len(n.ResolvedIPs) > 0 {
			v.ResolvedIPs = map[string][]string{}
			for d, addrs := range n.ResolvedIPs {
				for _, a := range addrs {
					v.ResolvedIPs[d] = append(v.ResolvedIPs[d], a.String())
				}
			}
		}
		for _, k := range n.Peers {
			v.Peers = append(v.Peers, e.peerName(k))
		}
		if len(n.Chosen) > 0 {
			v.Chosen = e.peerName(n.Chosen[0])
		}
		out = append(out, v)
	}
	return out
}

// peerName is a routing peer's FQDN, or its key when the map has no name
// for it. e.mu held.
func (e *Engine) peerName(k key.Public) string {
	if r := e.peers[k]; r != nil && r.cfg.GetFqdn() != "" {
		return r.cfg.GetFqdn()
	}
	return k.String()
}

// SelectNetworks selects networks by NetID: appendSel adds them to the
// selection, otherwise they replace it; all selects every network.
// Selecting an exit node deselects the other exit nodes. Unknown ids are
// an error and change nothing.
func (e *Engine) SelectNetworks(ids []string, appendSel, all bool) error {
	if err := e.routes.Select(ids, appendSel, all); err != nil {
		return err
	}
	e.evaluateRoutes()
	return nil
}

// DeselectNetworks deselects networks by NetID, or all of them.
func (e *Engine) DeselectNetworks(ids []string, all bool) error {
	if err := e.routes.Deselect(ids, all); err != nil {
		return err
	}
	e.evaluateRoutes()
	return nil
}

// RouteSelection is the current selection, for the daemon to persist.
func (e *Engine) RouteSelection() RouteSelection {
	s := e.routes.Selection()
	return RouteSelection{Selected: s.Selected, Deselected: s.Deselected, AllDeselected: s.AllDeselected}
}

// IsUnknownNetwork reports whether err is a selection naming a network the
// map does not offer (or several exit nodes): the user's mistake.
func IsUnknownNetwork(err error) bool {
	return errors.Is(err, routes.ErrUnknownNetwork) || errors.Is(err, routes.ErrTwoExitNodes)
}

// clientRoutes converts the map's routes, once, into routes this agent
// uses as a client (not those it routes itself).
func clientRoutes(nm *mgmtpb.NetworkMap, own key.Public) []routes.Route {
	var out []routes.Route
	for _, r := range nm.GetRoutes() {
		cr, ok := clientRoute(r)
		if !ok {
			continue
		}
		out = append(out, cr)
	}
	return routes.ClientRoutes(out, own)
}

// Network types of the Route message (SPEC-wire: 1 IPv4, 2 IPv6, 3 domain).
const (
	routeIPv4   = 1
	routeIPv6   = 2
	routeDomain = 3
)

func clientRoute(r *mgmtpb.Route) (routes.Route, bool) {
	peer, err := key.ParsePublic(r.GetPeer())
	if err != nil || r.GetNetID() == "" {
		return routes.Route{}, false
	}
	out := routes.Route{
		ID: r.GetID(), NetID: r.GetNetID(), Peer: peer, Metric: int(r.GetMetric()),
		Masquerade: r.GetMasquerade(), KeepRoute: r.GetKeepRoute(), SkipAutoApply: r.GetSkipAutoApply(),
	}
	switch r.GetNetworkType() {
	case routeDomain:
		if len(r.GetDomains()) == 0 {
			return routes.Route{}, false
		}
		out.Domains = slices.Clone(r.GetDomains())
	case routeIPv4, routeIPv6:
		p, err := netip.ParsePrefix(r.GetNetwork())
		if err != nil {
			return routes.Route{}, false
		}
		out.Prefix = p.Masked()
	default:
		// Older servers leave the type out: the network says what it is.
		if p, err := netip.ParsePrefix(r.GetNetwork()); err == nil && len(r.GetDomains()) == 0 {
			out.Prefix = p.Masked()
		} else if len(r.GetDomains()) > 0 {
			out.Domains = slices.Clone(r.GetDomains())
		} else {
			return routes.Route{}, false
		}
	}
	return out, true
}

// applyRoutes takes the routes of a new map. e.mu held.
func (e *Engine) applyRoutes(nm *mgmtpb.NetworkMap) {
	e.routes.SetOverlay(e.addr, e.addr6) // no route may take a part of the mesh
	e.routes.Update(clientRoutes(nm, e.o.Private.Public()))
	e.applyDomainRouting(nm)
	e.evaluateRoutesLocked()
	if e.routes.HasDomains() {
		select {
		case e.resolveNow <- struct{}{}:
		default:
		}
	}
}

// evaluateRoutes checks that the routing peers in use still answer, then
// re-chooses the routing peers and applies the result.
func (e *Engine) evaluateRoutes() { e.evaluateRoutesAt(time.Now()) }

// evaluateRoutesAt is evaluateRoutes at time now: the ticker's times are
// evenly spaced, so the liveness waits are not cut short by its jitter.
func (e *Engine) evaluateRoutesAt(now time.Time) {
	e.mu.Lock()
	watch := len(e.gone) > 0
	for _, r := range e.peers {
		watch = watch || len(r.routed) > 0
	}
	e.mu.Unlock()
	var stats map[key.Public]wg.Stats
	var err error
	if watch {
		stats, err = e.dev.PeerStats() // not under e.mu: it walks every peer
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if watch && err == nil {
		e.checkLiveness(now, stats)
	}
	e.evaluateRoutesLocked()
}

// handshaker is a device that can start a WireGuard handshake on demand
// (userspace WireGuard; the kernel's cannot, so there liveness probes are
// off and a dead routing peer is noticed by its connection alone).
type handshaker interface {
	Handshake(k key.Public) error
}

// checkLiveness feeds the counters of the routing peers in use (and of
// those found gone, until they answer again) to the liveness check,
// probes those it asks for and records the gone ones for the chooser.
// e.mu held.
func (e *Engine) checkLiveness(now time.Time, stats map[key.Public]wg.Stats) {
	hs, ok := e.dev.(handshaker)
	if !ok {
		return
	}
	watch := map[key.Public]routes.WGStats{}
	for k, r := range e.peers {
		s, have := stats[k]
		if !have || (len(r.routed) == 0 && !e.gone[k]) {
			continue
		}
		watch[k] = routes.WGStats{Rx: s.RxBytes, Tx: s.TxBytes, LastHandshake: s.LastHandshake}
	}
	for k, v := range e.liveness.Observe(now, watch) {
		switch v {
		case routes.Probe:
			if err := hs.Handshake(k); err != nil {
				e.log.Debug("probe a routing peer", "peer", k.String(), "err", err)
			}
		case routes.Gone:
			if !e.gone[k] {
				e.log.Warn("routing peer stopped answering; moving its routes", "peer", k.String())
			}
		}
		if v == routes.Gone {
			e.gone[k] = true
		} else {
			delete(e.gone, k)
		}
	}
	for k := range e.gone {
		if _, ok := watch[k]; !ok {
			delete(e.gone, k) // left the map
		}
	}
}

// evaluateRoutesLocked: e.mu held. The routed networks go into the chosen
// routing peer's allowed IPs (beside its own address) and leave those of a
// peer no longer chosen.
func (e *Engine) evaluateRoutesLocked() {
	// --disable-client-routes: the networks stay listed, none is used.
	if e.stopped || e.o.DisableClientRoutes {
		return
	}
	conn := func(k key.Public) (routes.PeerConn, bool) {
		r := e.peers[k]
		if r == nil {
			return routes.PeerConn{}, false
		}
		st := r.conn.Status()
		if e.gone[k] {
			// Its connection may still look fine (a relay carries it, or
			// ICE has not timed out yet): the peer itself does not answer.
			return routes.PeerConn{Relayed: st.Relayed, Left: true}, true
		}
		return routes.PeerConn{Connected: st.State == "Connected", Relayed: st.Relayed, Left: st.Left}, true
	}
	plan, _ := e.routes.Evaluate(context.Background(), conn, e.keepAddrs())
	for k, r := range e.peers {
		want := plan[k]
		if samePrefixes(r.routed, want) {
			continue
		}
		r.routed = want
		r.conn.SetAllowedIPs(r.allowed())
	}
}

// allowed is the peer's WireGuard allowed IPs: its own, then what it routes.
func (r *remote) allowed() []netip.Prefix {
	return append(slices.Clone(r.ips), r.routed...)
}

// runRoutes re-evaluates the routing peers every routeInterval (failover)
// and resolves domain routes every domainInterval or when a map brings
// new ones, until ctx ends.
func (e *Engine) runRoutes(ctx context.Context) {
	tick := time.NewTicker(routeInterval)
	defer tick.Stop()
	resolve := time.NewTicker(domainInterval)
	defer resolve.Stop()
	e.refreshKeep(ctx)
	var learned *coalescer // nil (never ready) without server routes
	var dnsRetry <-chan time.Time
	if e.srv != nil {
		learned = e.srv.learned
		t := time.NewTicker(dnsRetryEvery)
		defer t.Stop()
		dnsRetry = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-tick.C:
			e.evaluateRoutesAt(now)
		case <-e.reroute:
			e.evaluateRoutes()
		case k := <-e.probeReq:
			e.mu.Lock()
			e.liveness.ProbeNow(k)
			e.mu.Unlock()
			e.evaluateRoutes()
		case <-resolve.C:
			e.refreshKeep(ctx)
			e.resolveDomains(ctx)
		case <-e.resolveNow:
			e.resolveDomains(ctx)
		case <-e.evalReq.ready():
			e.evalReq.run(e.evaluateRoutes)
		case <-learned.ready():
			learned.run(e.srv.relearn)
		case <-dnsRetry:
			if e.srv.retryDNS() {
				// Now listening: open its port to the peers.
				e.mu.Lock()
				if nm := e.srv.lastMap(); nm != nil && !e.stopped {
					e.applyFirewall(nm)
				}
				e.mu.Unlock()
			}
		}
	}
}

func (e *Engine) resolveDomains(ctx context.Context) {
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	changed, err := e.routes.Resolve(rctx)
	if err != nil {
		e.log.Warn("resolve domain routes", "err", err)
	}
	if changed {
		e.evaluateRoutes()
	}
}

// keepAddrs is the addresses the agent's own traffic goes to (management,
// signal, relays, STUN/TURN): no route may take them into the tunnel.
// e.mu held.
func (e *Engine) keepAddrs() []netip.Addr { return e.keep }

// refreshKeep resolves the agent's servers into keepAddrs. Names are
// looked up outside e.mu; a failed lookup keeps the addresses known.
func (e *Engine) refreshKeep(ctx context.Context) {
	e.mu.Lock()
	hosts := []string{hostOf(e.o.Management.Addr), hostOf(e.sig.Addr)}
	for _, u := range e.urls {
		hosts = append(hosts, u.Host)
	}
	e.mu.Unlock()
	for _, st := range e.relays.States() {
		hosts = append(hosts, hostOf(urlHost(st.URI)))
	}
	var addrs []netip.Addr
	for _, h := range hosts {
		if h == "" {
			continue
		}
		if a, err := netip.ParseAddr(h); err == nil {
			addrs = append(addrs, a.Unmap())
			continue
		}
		lctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		found, err := sockmark.Resolver().LookupNetIP(lctx, "ip", h)
		cancel()
		if err != nil {
			e.log.Debug("resolve a server's name for the route exclusions", "host", h, "err", err)
			e.mu.Lock()
			addrs = append(addrs, e.keepByHost[h]...)
			e.mu.Unlock()
			continue
		}
		for i := range found {
			found[i] = found[i].Unmap()
		}
		e.mu.Lock()
		e.keepByHost[h] = found
		e.mu.Unlock()
		addrs = append(addrs, found...)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	addrs = slices.Compact(addrs)
	e.mu.Lock()
	e.keep = addrs
	e.mu.Unlock()
}

// hostOf strips the port from host:port (and the brackets of IPv6).
func hostOf(hostport string) string {
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		return h
	}
	return strings.Trim(hostport, "[]")
}

// urlHost is the host:port of a URL such as rels://relay.example:443.
func urlHost(s string) string {
	if u, err := url.Parse(s); err == nil && u.Host != "" {
		return u.Host
	}
	return s
}

// startRoutes sets up the route client on interface iface. Where the
// system cannot take routes, the routing peers are still chosen (their
// networks go into WireGuard) and every apply reports why no OS route is
// installed.
func (e *Engine) startRoutes(iface string) {
	stateFile := ""
	if e.o.StateDir != "" {
		stateFile = filepath.Join(e.o.StateDir, "routes.json")
	}
	var sys routes.System
	sys, err := routes.NewSystem(routes.SystemConfig{Interface: iface, StateFile: stateFile, KeepLAN: e.o.ExitNodeLAN, Log: e.log})
	if err != nil {
		e.log.Error("routes to networks cannot be installed", "err", err)
		sys = unavailableSystem{err}
	}
	sel := e.o.RouteSelection
	e.routes = routes.NewManager(routes.Config{
		System: sys, Log: e.log,
		Selection: routes.Selection{Selected: sel.Selected, Deselected: sel.Deselected, AllDeselected: sel.AllDeselected},
		Lookup: func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		},
	})
	e.resolveNow = make(chan struct{}, 1)
	e.reroute = make(chan struct{}, 1)
	e.evalReq = newCoalescer()
	e.probeReq = make(chan key.Public, 16)
	e.liveness = routes.NewLiveness(routes.LivenessConfig{})
	e.gone = map[key.Public]bool{}
	e.keepByHost = map[string][]netip.Addr{}
}

// stopRoutes removes every route installed; the goroutines are done.
func (e *Engine) stopRoutes() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := e.routes.Close(ctx); err != nil {
		e.log.Error("remove routes", "err", err)
	}
}

// unavailableSystem stands for a system that cannot take routes.
type unavailableSystem struct{ err error }

func (u unavailableSystem) Apply(_ context.Context, want []netip.Prefix, _ []netip.Addr) error {
	if len(want) == 0 {
		return nil
	}
	return u.err
}

func (unavailableSystem) Close(context.Context) error { return nil }

// goodbyeTimeout bounds how long stopping waits for the GO_IDLE messages.
const goodbyeTimeout = time.Second

// sayGoodbye sends GO_IDLE to every connected peer, in parallel and
// within goodbyeTimeout: stopping must not hang on a slow signal server.
func (e *Engine) sayGoodbye(peers map[key.Public]*remote) {
	ctx, cancel := context.WithTimeout(context.Background(), goodbyeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for k, r := range peers {
		if r.conn.Status().State != "Connected" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				return
			}
			defer func() { <-sem }()
			if err := r.conn.GoIdle(ctx); err != nil {
				e.log.Debug("tell a peer we are going away", "peer", k.String(), "err", err)
			}
		}()
	}
	wg.Wait()
}

// probeNow asks the liveness check to probe peer k at once: it sent a
// GO_IDLE that does not prove it left (peer.Config.OnIdleHint). It never
// blocks (called from peer loops); when requests pile up, the dropped one
// only waits for the regular liveness check.
func (e *Engine) probeNow(k key.Public) {
	select {
	case e.probeReq <- k:
	default:
	}
}

// routeNow asks for the routing peers to be chosen again at once (a
// routing peer left). It never blocks: it is called from peer loops.
func (e *Engine) routeNow() {
	select {
	case e.reroute <- struct{}{}:
	default:
	}
}
