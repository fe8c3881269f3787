package routes

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/wiremesh/wiremesh/internal/key"
)

// MaxDomainNames caps the names learned per domain route when its routing
// peers resolve them (one per name a client asked about under a wildcard).
const MaxDomainNames = 256

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
}

// PeerResolved reports SetPeerResolved's setting.
func (m *Manager) PeerResolved() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.peerResolved
}

// coverage is how specifically domain pattern d covers name: 0 not at
// all, then the longer a wildcard's base the better, an exact name best.
func coverage(d, name string) int {
	d = strings.TrimSuffix(strings.ToLower(d), ".")
	if base, ok := strings.CutPrefix(d, "*."); ok {
		if name == base || strings.HasSuffix(name, "."+base) {
			return 1 + len(base)
		}
		return 0
	}
	if name == d {
		return 1 << 30
	}
	return 0
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
			if c := coverage(d, name); c > score {
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
	if slices.Equal(old, next) {
		return false
	}
	byName[name] = next
	return true
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
