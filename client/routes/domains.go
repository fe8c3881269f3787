package routes

import (
	"net/netip"
	"slices"
	"time"

	"github.com/wiremesh/wiremesh/internal/dnsname"
	"github.com/wiremesh/wiremesh/internal/key"
)

// MaxDomainNames caps the names learned per domain route when its routing
// peers resolve them (one per name a client asked about under a wildcard).
const MaxDomainNames = 256

// LearnedHold is how long a name learned from a routing peer stays routed
// after the last answer about it: the routing peer's DNS forwarder lets
// its addresses through that long (dnsfwd.DefaultHold), and a host asks
// again every answer TTL (60 s) while it uses the name. Without it the
// names of a wildcard only ever accumulate until MaxDomainNames refuses
// new ones, and failover re-asks names nobody uses any more.
const LearnedHold = 10 * time.Minute

// SetPeerResolved says whether domain routes are resolved by their routing
// peers (the account's routing_peer_dns_resolution_enabled): then Resolve
// looks nothing up and the addresses come from Learn, as the agent's
// resolver relays the routing peers' answers; otherwise this agent
// resolves the names itself. A switch forgets what the other way found.
func (m *Manager) SetPeerResolved(on bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.peerResolved == on {
		return
	}
	m.peerResolved = on
	clear(m.resolved)
	clear(m.learnedAt)
}

// PeerResolved reports SetPeerResolved's setting.
func (m *Manager) PeerResolved() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peerResolved
}

// match is the selected domain route group covering name most
// specifically (the first by ID among equals). m.mu held.
func (m *Manager) match(name string) (Group, bool) {
	active := m.sel.Active(m.groups)
	best, score := Group{}, 0
	for _, g := range m.groups {
		if !active[g.ID] || len(g.Routes) == 0 || !g.Routes[0].IsDomain() {
			continue
		}
		for _, d := range g.Routes[0].Domains {
			if c := dnsname.Coverage(d, name); c > score {
				best, score = g, c
			}
		}
	}
	return best, score > 0
}

// DomainPeer is, for a name (lower case, no final dot) a selected domain
// route covers, the routing peer in use for it; ok=false when no route
// covers it, chosen=false when one does but has no routing peer now.
func (m *Manager) DomainPeer(name string) (peer key.Public, chosen, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.peerResolved {
		return key.Public{}, false, false
	}
	g, ok := m.match(name)
	if !ok {
		return key.Public{}, false, false
	}
	r, chosen := m.chosen[g.ID]
	return r.Peer, chosen, true
}

// Domains are the domains of the selected domain routes.
func (m *Manager) Domains() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	active := m.sel.Active(m.groups)
	var out []string
	for _, g := range m.groups {
		if active[g.ID] && len(g.Routes) > 0 && g.Routes[0].IsDomain() {
			out = append(out, g.Routes[0].Domains...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Learn records what name resolved to through its routing peer: the
// addresses of the route covering it (capped at MaxDomainAddrs per name
// and MaxDomainNames per route; routes marked KeepRoute keep the earlier
// ones too). It reports whether anything changed (the caller evaluates).
// The addresses belong to the route, not to a routing peer: when another
// routing peer takes over, they move to it.
func (m *Manager) Learn(name string, addrs []netip.Addr) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.peerResolved {
		return false
	}
	g, ok := m.match(name)
	if !ok {
		return false
	}
	m.expireLearned(m.cfg.Now())
	byName := m.resolved[g.ID]
	if byName == nil {
		byName = map[string][]netip.Addr{}
		m.resolved[g.ID] = byName
	}
	old, known := byName[name]
	if !known && len(byName) >= MaxDomainNames {
		m.cfg.Log.Warn("domain route has too many names; this one is not routed", "name", name, "max", MaxDomainNames)
		return false
	}
	next := slices.Clone(addrs)
	if slices.ContainsFunc(g.Routes, func(r Route) bool { return r.KeepRoute }) {
		next = append(next, old...)
	}
	slices.SortFunc(next, netip.Addr.Compare)
	next = m.usableAddrs(name, slices.Compact(next))
	if len(next) == 0 {
		return false
	}
	// Every answer keeps the name routed for another LearnedHold.
	at := m.learnedAt[g.ID]
	if at == nil {
		at = map[string]time.Time{}
		m.learnedAt[g.ID] = at
	}
	at[name] = m.cfg.Now()
	if slices.Equal(old, next) {
		return false
	}
	byName[name] = next
	return true
}

// expireLearned forgets the names learned from routing peers that no
// answer named for LearnedHold; it reports whether any was (their routes
// go at the next plan). m.mu held.
func (m *Manager) expireLearned(now time.Time) bool {
	if !m.peerResolved {
		return false
	}
	dropped := false
	for id, at := range m.learnedAt {
		byName := m.resolved[id]
		for name, t := range at {
			if now.Sub(t) >= LearnedHold {
				delete(at, name)
				delete(byName, name)
				delete(m.reask, name)
				dropped = true
			}
		}
		if len(at) == 0 {
			delete(m.learnedAt, id)
		}
		if byName != nil && len(byName) == 0 {
			delete(m.resolved, id)
		}
	}
	return dropped
}

// noteReask marks the names learned for group id to be asked again: its
// routing peer changed, and the new one lets through only what its own
// DNS forwarder answered. m.mu held.
func (m *Manager) noteReask(id HAID) {
	if !m.peerResolved {
		return
	}
	for name := range m.resolved[id] {
		if m.reask == nil {
			m.reask = map[string]bool{}
		}
		m.reask[name] = true
	}
}

// Reask returns, once, the names to ask the new routing peer of their
// domain route about (the addresses they had stay routed meanwhile).
func (m *Manager) Reask() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]string, 0, len(m.reask))
	for name := range m.reask {
		out = append(out, name)
	}
	clear(m.reask)
	slices.Sort(out)
	return out
}
