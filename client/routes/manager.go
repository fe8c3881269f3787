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
	lastErr  error
	closed   bool
	// applied, lastWant and lastKeep: what the system was last given.
	applied  bool
	lastWant []netip.Prefix
	lastKeep []netip.Addr
}

// NewManager returns a manager with no routes.
func NewManager(cfg Config) *Manager {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Manager{cfg: cfg, sel: cfg.Selection.clone(), chooser: NewChooser(cfg.Grace),
		chosen: map[HAID]Route{}, resolved: map[HAID]map[string][]netip.Addr{}}
}

// Update replaces the routes (the client routes of the latest map).
func (m *Manager) Update(rs []Route) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.routes = slices.Clone(rs)
	m.groups = Groups(m.routes)
	for id := range m.resolved {
		if !slices.ContainsFunc(m.groups, func(g Group) bool { return g.ID == id }) {
			delete(m.resolved, id)
		}
	}
}

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
	prev := m.chosen
	m.chosen = m.chooser.Choose(m.cfg.Now(), use, conn)
	for id, r := range m.chosen {
		if p, ok := prev[id]; ok && p.Peer != r.Peer {
			m.cfg.Log.Info("routing peer changed", "network", r.NetID, "from", p.Peer.String(), "to", r.Peer.String())
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
	if m.cfg.System != nil && (m.lastErr != nil || !m.applied || !slices.Equal(want, m.lastWant) || !slices.Equal(keep, m.lastKeep)) {
		err = m.cfg.System.Apply(ctx, want, keep)
		m.applied, m.lastWant, m.lastKeep = true, want, slices.Clone(keep)
	} else {
		err = m.lastErr
	}
	if err != nil && (m.lastErr == nil || m.lastErr.Error() != err.Error()) {
		m.cfg.Log.Error("install routes", "err", err)
	}
	m.lastErr = err
	return plan, err
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
