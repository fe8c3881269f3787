package routes

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
)

// System installs routes into the operating system's routing tables. Apply
// makes the installed set exactly want; it must keep the addresses in keep
// (management, signal, relay, STUN/TURN) reachable outside the tunnel, and
// when it cannot, leave out every route covering one of them and say so in
// its error. Close removes everything it installed.
type System interface {
	Apply(ctx context.Context, want []netip.Prefix, keep []netip.Addr) error
	Close(ctx context.Context) error
}

// refresher is a System whose Apply must run again now and then while the
// routes cover a server address, even when nothing else changed: the
// command-driven systems follow the default gateway their host routes to
// the servers point to.
type refresher interface{ refreshEvery() time.Duration }

// overlayUser is a System that needs the mesh's networks: Linux puts the
// IPv6 overlay into its table while an IPv4-only exit node's guard makes
// the rest of IPv6 unreachable there.
type overlayUser interface{ setOverlay(ps []netip.Prefix) }

// Caps on what a network map makes the agent install: a map (or a DNS
// answer) must not be able to fill the routing table.
const (
	MaxClientRoutes = 4096
	MaxDomainAddrs  = 64
)

// Config configures a Manager.
type Config struct {
	System    System
	Selection Selection
	Log       *slog.Logger
	// Now is the clock (time.Now when nil); tests inject theirs.
	Now func() time.Time
	// Lookup resolves a domain route's name (nil: domain routes get no
	// addresses).
	Lookup func(ctx context.Context, host string) ([]netip.Addr, error)
	// Grace overrides FailoverGrace.
	Grace time.Duration
	// Overlay is the mesh's network (see SetOverlay).
	Overlay []netip.Prefix
}

// Manager keeps the map's client routes, the user's selection, the chosen
// routing peer of each HA group and the addresses domain routes resolve to,
// and installs the result through its System. It is safe for concurrent
// use; it starts no goroutines (the engine drives Evaluate and Resolve).
type Manager struct {
	cfg Config

	mu       sync.Mutex
	routes   []Route
	groups   []Group
	sel      Selection
	chooser  *Chooser
	chosen   map[HAID]Route
	resolved map[HAID]map[string][]netip.Addr
	// learnedAt: when an answer last named each name learned from a
	// routing peer (domains.go), for LearnedHold.
	learnedAt map[HAID]map[string]time.Time
	lastErr   error
	closed    bool
	// applied, lastWant and lastKeep: what the system was last given.
	applied   bool
	lastWant  []netip.Prefix
	lastKeep  []netip.Addr
	lastApply time.Time
	overlay   []netip.Prefix
	// dropped: the routes Update left out, so each is logged once.
	dropped map[string]bool
	// peerResolved: see SetPeerResolved; reask: see Reask.
	peerResolved bool
	reask        map[string]bool
}

// NewManager returns a manager with no routes.
func NewManager(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if o, ok := cfg.System.(overlayUser); ok {
		o.setOverlay(slices.Clone(cfg.Overlay))
	}
	return &Manager{cfg: cfg, sel: cfg.Selection.clone(), chooser: NewChooser(cfg.Grace),
		chosen: map[HAID]Route{}, resolved: map[HAID]map[string][]netip.Addr{}, learnedAt: map[HAID]map[string]time.Time{},
		overlay: slices.Clone(cfg.Overlay), dropped: map[string]bool{}}
}

// SetOverlay sets the mesh's network(s). No route may take a part of it:
// a routed prefix inside it would move peers' addresses from their own
// WireGuard peers to the routing peer. Addresses resolved before that no
// longer qualify are dropped; the routes are checked at the next Update.
func (m *Manager) SetOverlay(ps ...netip.Prefix) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var next []netip.Prefix
	for _, p := range ps {
		if p.IsValid() {
			next = append(next, p.Masked())
		}
	}
	if slices.Equal(next, m.overlay) {
		return
	}
	m.overlay = next
	if o, ok := m.cfg.System.(overlayUser); ok {
		o.setOverlay(slices.Clone(next))
		m.applied = false // the next Evaluate applies it
	}
	for id, byName := range m.resolved {
		for d, addrs := range byName {
			byName[d] = m.usableAddrs(d, addrs)
		}
		m.resolved[id] = byName
	}
}

// unusable says why a route to p must not be installed ("" when it may):
// the overlay, loopback, link-local and multicast are never routed, nor
// an unspecified address other than a default route (an exit node).
func (m *Manager) unusable(p netip.Prefix) string {
	a := p.Masked().Addr()
	for _, o := range m.overlay {
		if o.Bits() <= p.Bits() && o.Contains(a) {
			return "inside the overlay network " + o.String()
		}
	}
	switch {
	case a.IsUnspecified() && p.Bits() != 0:
		return "unspecified address"
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsMulticast():
		return "multicast"
	}
	return ""
}

// usableAddrs drops, with a log line, the addresses of domain d that must
// not be routed, and caps them at MaxDomainAddrs. m.mu held.
func (m *Manager) usableAddrs(d string, addrs []netip.Addr) []netip.Addr {
	out := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		if why := m.unusable(netip.PrefixFrom(a, a.BitLen())); why != "" {
			m.cfg.Log.Warn("domain route address dropped", "domain", d, "addr", a.String(), "reason", why)
			continue
		}
		out = append(out, a)
	}
	if len(out) > MaxDomainAddrs {
		m.cfg.Log.Warn("domain route resolves to too many addresses; the rest are not routed", "domain", d, "addrs", len(out), "max", MaxDomainAddrs)
		out = out[:MaxDomainAddrs]
	}
	return out
}

// Update replaces the routes (the client routes of the latest map). Routes
// to networks that must not be routed (see unusable) and those past
// MaxClientRoutes are dropped, each logged once.
func (m *Manager) Update(rs []Route) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes = m.usableRoutes(rs)
	m.groups = Groups(m.routes)
	for id := range m.resolved {
		if !slices.ContainsFunc(m.groups, func(g Group) bool { return g.ID == id }) {
			delete(m.resolved, id)
			delete(m.learnedAt, id)
		}
	}
}

// usableRoutes is rs without the routes Update drops. m.mu held.
func (m *Manager) usableRoutes(rs []Route) []Route {
	out := make([]Route, 0, min(len(rs), MaxClientRoutes))
	dropped := map[string]bool{}
	over := 0
	for _, r := range rs {
		if !r.IsDomain() {
			if why := m.unusable(r.Prefix); why != "" {
				k := r.ID + " " + r.Prefix.String()
				if !m.dropped[k] {
					m.cfg.Log.Warn("route dropped", "network", r.NetID, "route", r.ID, "prefix", r.Prefix.String(), "reason", why)
				}
				dropped[k] = true
				continue
			}
		}
		if len(out) == MaxClientRoutes {
			over++
			continue
		}
		out = append(out, r)
	}
	if over > 0 && !m.dropped[overKey] {
		m.cfg.Log.Warn("the network map has too many routes; the rest are not installed", "max", MaxClientRoutes, "dropped", over)
	}
	if over > 0 {
		dropped[overKey] = true
	}
	m.dropped = dropped
	return out
}

// overKey marks in Manager.dropped that routes past MaxClientRoutes were.
const overKey = "\x00over"

// Plan is what Evaluate decided: the routed networks each routing peer in
// use carries (they go into its WireGuard allowed IPs).
type Plan map[key.Public][]netip.Prefix

// Evaluate chooses the routing peers at the current time, installs the
// resulting routes and returns the plan. The plan is returned even when
// the system failed to install some routes (the error says which).
func (m *Manager) Evaluate(ctx context.Context, conn ConnFunc, keep []netip.Addr) (Plan, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return Plan{}, nil
	}
	active := m.sel.Active(m.groups)
	var use []Group
	for _, g := range m.groups {
		if active[g.ID] {
			use = append(use, g)
		}
	}
	now := m.cfg.Now()
	m.expireLearned(now)
	prev := m.chosen
	m.chosen = m.chooser.Choose(now, use, conn)
	for id, r := range m.chosen {
		if p, ok := prev[id]; ok && p.Peer != r.Peer {
			m.cfg.Log.Info("routing peer changed", "network", r.NetID, "from", p.Peer.String(), "to", r.Peer.String())
			m.noteReask(id)
		}
	}
	plan := Plan{}
	owner := map[netip.Prefix]key.Public{}
	var want []netip.Prefix
	for _, g := range use { // groups are sorted: the first group wins a prefix
		r, ok := m.chosen[g.ID]
		if !ok {
			continue
		}
		for _, p := range m.prefixes(g.ID, r) {
			if _, taken := owner[p]; taken {
				continue
			}
			owner[p] = r.Peer
			plan[r.Peer] = append(plan[r.Peer], p)
			want = append(want, p)
		}
	}
	slices.SortFunc(want, comparePrefix)
	for k := range plan {
		slices.SortFunc(plan[k], comparePrefix)
	}
	var err error
	// The system is told only of changes (and retried after a failure):
	// this runs every second.
	if m.cfg.System != nil && (m.lastErr != nil || !m.applied || !slices.Equal(want, m.lastWant) || !slices.Equal(keep, m.lastKeep) || m.refreshDue(now, want, keep)) {
		err = m.cfg.System.Apply(ctx, want, keep)
		m.applied, m.lastWant, m.lastKeep, m.lastApply = true, want, slices.Clone(keep), now
	} else {
		err = m.lastErr
	}
	if err != nil && (m.lastErr == nil || m.lastErr.Error() != err.Error()) {
		m.cfg.Log.Error("install routes", "err", err)
	}
	m.lastErr = err
	return plan, err
}

// refreshDue reports whether a refresher must apply again. m.mu held.
func (m *Manager) refreshDue(now time.Time, want []netip.Prefix, keep []netip.Addr) bool {
	r, ok := m.cfg.System.(refresher)
	return ok && len(covering(want, keep)) > 0 && now.Sub(m.lastApply) >= r.refreshEvery()
}

// prefixes is what a chosen route puts into the tunnel: its network, or
// the addresses its domains resolved to.
func (m *Manager) prefixes(id HAID, r Route) []netip.Prefix {
	if !r.IsDomain() {
		return []netip.Prefix{r.Prefix.Masked()}
	}
	var out []netip.Prefix
	for _, addrs := range m.resolved[id] {
		for _, a := range addrs {
			out = append(out, netip.PrefixFrom(a, a.BitLen()))
		}
	}
	slices.SortFunc(out, comparePrefix)
	return slices.Compact(out)
}

func comparePrefix(a, b netip.Prefix) int {
	if c := a.Addr().Compare(b.Addr()); c != 0 {
		return c
	}
	return a.Bits() - b.Bits()
}

// Resolve looks up the domains of every domain route. A route marked
// KeepRoute keeps addresses that no longer resolve (connections to them
// stay in the tunnel); a failed lookup keeps what the name had. It reports
// whether anything changed.
func (m *Manager) Resolve(ctx context.Context) (bool, error) {
	m.mu.Lock()
	type job struct {
		id      HAID
		domains []string
		keep    bool
	}
	var jobs []job
	for _, g := range m.groups {
		if len(g.Routes) > 0 && g.Routes[0].IsDomain() {
			keep := slices.ContainsFunc(g.Routes, func(r Route) bool { return r.KeepRoute })
			jobs = append(jobs, job{g.ID, g.Routes[0].Domains, keep})
		}
	}
	lookup := m.cfg.Lookup
	if m.peerResolved {
		lookup = nil // the routing peers resolve them (Learn)
	}
	m.mu.Unlock()
	if lookup == nil {
		return false, nil
	}
	// Lookups run without the lock: a slow resolver must not block status.
	found := map[HAID]map[string][]netip.Addr{}
	var errs []error
	for _, j := range jobs {
		found[j.id] = map[string][]netip.Addr{}
		for _, d := range j.domains {
			if len(d) > 2 && d[:2] == "*." {
				continue // a wildcard names no address of its own
			}
			addrs, err := lookup(ctx, d)
			if err != nil {
				errs = append(errs, fmt.Errorf("resolve %s: %w", d, err))
				found[j.id][d] = nil
				continue
			}
			for i := range addrs {
				addrs[i] = addrs[i].Unmap()
			}
			slices.SortFunc(addrs, netip.Addr.Compare)
			found[j.id][d] = slices.Compact(addrs)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	changed := false
	for _, j := range jobs {
		old := m.resolved[j.id]
		next := map[string][]netip.Addr{}
		for d, addrs := range found[j.id] {
			if addrs == nil || j.keep {
				addrs = mergeAddrs(old[d], addrs)
			}
			addrs = m.usableAddrs(d, addrs)
			if len(addrs) > 0 {
				next[d] = addrs
			}
			if !slices.Equal(old[d], next[d]) {
				changed = true
			}
		}
		m.resolved[j.id] = next
	}
	return changed, errors.Join(errs...)
}

func mergeAddrs(a, b []netip.Addr) []netip.Addr {
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// HasDomains reports whether any route names domains.
func (m *Manager) HasDomains() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.ContainsFunc(m.routes, Route.IsDomain)
}

// Selection is the current selection, to persist.
func (m *Manager) Selection() Selection {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sel.clone()
}

// Select changes the selection (see Selection.Select); the caller
// evaluates afterwards to apply it.
func (m *Manager) Select(ids []string, appendSel, all bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	known, exits := m.netIDs()
	n, err := m.sel.Select(ids, appendSel, all, known, exits)
	if err != nil {
		return err
	}
	m.sel = n
	return nil
}

// Deselect changes the selection (see Selection.Deselect).
func (m *Manager) Deselect(ids []string, all bool) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	known, _ := m.netIDs()
	n, err := m.sel.Deselect(ids, all, known)
	if err != nil {
		return err
	}
	m.sel = n
	return nil
}

func (m *Manager) netIDs() (known, exits map[string]bool) {
	known, exits = map[string]bool{}, map[string]bool{}
	for _, g := range m.groups {
		known[g.NetID] = true
		if g.Exit() {
			exits[g.NetID] = true
		}
	}
	return known, exits
}

// Network is one NetID as `netbird networks ls` shows it.
type Network struct {
	ID          string
	Prefixes    []netip.Prefix // empty for a domain route
	Domains     []string
	ResolvedIPs map[string][]netip.Addr
	Selected    bool
	ExitNode    bool
	Peers       []key.Public // every routing peer offering it
	Chosen      []key.Public // the routing peers in use (one per HA group)
}

// Networks lists the networks by NetID.
func (m *Manager) Networks() []Network {
	m.mu.Lock()
	defer m.mu.Unlock()
	active := m.sel.Active(m.groups)
	by := map[string]*Network{}
	var order []string
	for _, g := range m.groups {
		n := by[g.NetID]
		if n == nil {
			n = &Network{ID: g.NetID, ResolvedIPs: map[string][]netip.Addr{}}
			by[g.NetID] = n
			order = append(order, g.NetID)
		}
		n.Selected = n.Selected || active[g.ID]
		n.ExitNode = n.ExitNode || g.Exit()
		r0 := g.Routes[0]
		if r0.IsDomain() {
			n.Domains = append(n.Domains, r0.Domains...)
			for d, a := range m.resolved[g.ID] {
				n.ResolvedIPs[d] = append(n.ResolvedIPs[d], a...)
			}
		} else {
			n.Prefixes = append(n.Prefixes, r0.Prefix.Masked())
		}
		for _, r := range g.Routes {
			if !slices.Contains(n.Peers, r.Peer) {
				n.Peers = append(n.Peers, r.Peer)
			}
		}
		if c, ok := m.chosen[g.ID]; ok && active[g.ID] && !slices.Contains(n.Chosen, c.Peer) {
			n.Chosen = append(n.Chosen, c.Peer)
		}
	}
	slices.Sort(order)
	out := make([]Network, 0, len(order))
	for _, id := range order {
		// An exit node's pair lists as "0.0.0.0/0,::/0" whatever the
		// order of its groups.
		slices.SortFunc(by[id].Prefixes, comparePrefix)
		out = append(out, *by[id])
	}
	return out
}

// LastError is the last installation error (nil when the routes are in).
func (m *Manager) LastError() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastErr
}

// Close removes every installed route; the manager installs nothing after.
func (m *Manager) Close(ctx context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	if m.cfg.System == nil {
		return nil
	}
	return m.cfg.System.Close(ctx)
}
