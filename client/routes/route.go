// Package routes makes the agent a route client: it takes the routes of the
// network map (networks reached through routing peers, exit nodes, domain
// routes), keeps the user's selection of them, picks one routing peer per
// highly available route and installs the chosen networks in the operating
// system's routing tables, so that traffic to them enters the tunnel while
// the agent's own traffic (management, signal, relay, STUN/TURN, WireGuard)
// never does.
//
// It does not forward traffic for others (the routing-peer side lives in the
// engine and the firewalls), does not talk to management and does not know
// protobuf: the engine converts the map's routes into Route values once.
package routes

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/wiremesh/wiremesh/internal/key"
)

// HAID groups the routes that make one highly available route: the same
// NetID and the same destination (network, or domains for a domain route),
// as the official client groups them. A client uses one routing peer of a
// group at a time.
type HAID string

// Route is one route of the network map: one destination through one
// routing peer.
type Route struct {
	ID    string // unique per routing peer ("routeID" or "routeID:peerID")
	NetID string // the name users select and deselect
	// Exactly one of Prefix (valid) and Domains is set.
	Prefix  netip.Prefix
	Domains []string // punycode; "*.example.com" for a wildcard
	// Peer is the routing peer's WireGuard key.
	Peer          key.Public
	Metric        int // lower wins
	Masquerade    bool
	KeepRoute     bool // domain routes: keep addresses no longer resolved
	SkipAutoApply bool // exit nodes only: not selected until the user does
}

// IsDomain reports whether the route's destination is a set of domains.
func (r Route) IsDomain() bool { return !r.Prefix.IsValid() && len(r.Domains) > 0 }

// IsExitNode reports whether the route is a default route (0.0.0.0/0 or ::/0).
func (r Route) IsExitNode() bool { return r.Prefix.IsValid() && r.Prefix.Bits() == 0 }

// HA is the route's group key.
func (r Route) HA() HAID {
	if r.IsDomain() {
		return HAID(r.NetID + "|" + strings.Join(r.Domains, ", "))
	}
	return HAID(r.NetID + "|" + r.Prefix.Masked().String())
}

// ClientRoutes drops the routes this agent serves itself (Peer == own key)
// and every route of a group it is a routing peer of: traffic to a network
// it routes must not go through another routing peer of the same group,
// which is what the official client does.
func ClientRoutes(all []Route, own key.Public) []Route {
	mine := map[HAID]bool{}
	for _, r := range all {
		if r.Peer == own {
			mine[r.HA()] = true
		}
	}
	var out []Route
	for _, r := range all {
		if !mine[r.HA()] {
			out = append(out, r)
		}
	}
	return out
}

// Group is the routes of one HA id, sorted by route ID.
type Group struct {
	ID    HAID
	NetID string // the routes' NetID, or for a paired IPv6 exit node its IPv4 partner's (see Groups)
	// Routes are the candidates: one per routing peer.
	Routes []Route
}

// v6ExitSuffix marks the IPv6 half of an exit node that management sends
// as its own NetID ("exit" with 0.0.0.0/0, "exit-v6" with ::/0); the
// official client selects the pair as one network, and so do we.
const v6ExitSuffix = "-v6"

// Exit reports whether the group is an exit node.
func (g Group) Exit() bool { return len(g.Routes) > 0 && g.Routes[0].IsExitNode() }

// Groups gathers routes by HA id, in a stable order.
func Groups(rs []Route) []Group {
	by := map[HAID]*Group{}
	var order []HAID
	for _, r := range rs {
		id := r.HA()
		g := by[id]
		if g == nil {
			g = &Group{ID: id, NetID: r.NetID}
			by[id] = g
			order = append(order, id)
		}
		g.Routes = append(g.Routes, r)
	}
	slices.Sort(order)
	v4Exits := map[string]bool{}
	for _, g := range by {
		if r := g.Routes[0]; r.IsExitNode() && r.Prefix.Addr().Is4() {
			v4Exits[g.NetID] = true
		}
	}
	out := make([]Group, 0, len(order))
	for _, id := range order {
		g := by[id]
		slices.SortFunc(g.Routes, func(a, b Route) int { return strings.Compare(a.ID, b.ID) })
		if r := g.Routes[0]; r.IsExitNode() && r.Prefix.Addr().Is6() {
			if base, ok := strings.CutSuffix(g.NetID, v6ExitSuffix); ok && v4Exits[base] {
				g.NetID = base
			}
		}
		out = append(out, *g)
	}
	return out
}
