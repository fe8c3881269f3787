package networkmap

import (
	"cmp"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
)

// Routes and network resources, as NetBird's management server delivers
// them (so that official clients route through our routing peers and the
// other way round). What a peer gets:
//
//   - As a routing peer: its own enabled routes (whatever their
//     distribution groups), with Peer set to its own key, which is how a
//     client knows it serves them; and the route firewall rules for them.
//   - As a client: the enabled routes of the routing peers its policies let
//     it see, when one of the route's distribution groups holds it, except
//     routes of a highly available group (same NetID and destination) it
//     serves itself. A route whose routing peer it cannot see is not sent:
//     the official client could not use it anyway (it waits for a peer that
//     never appears in its RemotePeers).
//   - A route with peer_groups becomes one route per member peer, with the
//     ID "<route>:<peer>" and the same NetID: clients group them by NetID
//     and destination and pick one (HA).
//   - Network resources: a peer that the sources of a policy naming the
//     resource (by one of its groups or by DestinationResource) hold, and
//     whose posture passes, gets one route per router of the network, ID
//     "<resource>:<router peer>", NetID the resource's name, KeepRoute set;
//     it also sees those routers as peers. A router gets the resource's
//     route with its own key and sees every source peer. A resource that no
//     enabled policy names reaches nobody.
//   - Domain routes carry the domains, NetworkType 3 and the placeholder
//     network 192.0.2.0/32 (the client ignores Network when Domains are
//     set; the reference fills it so older clients parse it).
//   - IPv6 destinations (::/0, v6 prefixes) are delivered only to
//     v6-active peers, through v6-active routing peers, and a 0.0.0.0/0
//     route is mirrored as ::/0 for them (see v6.go).
//   - Peers pending approval and temporary peers get no routes, serve none
//     and are no source of a route firewall rule.
//
// Route firewall rules (routesFirewallRules) go to routing peers only:
//
//   - A route without access control groups: one accept-all rule from
//     0.0.0.0/0 to the route's network (with the domains for a domain
//     route), so any client that got the route may use it.
//   - With access control groups: for every enabled rule of an enabled
//     policy whose destinations hold such a group, a rule with the rule's
//     action, protocol and ports, from the rule's source peers (posture
//     checked) that are also in the route's distribution groups, as /32s.
//     The reference walks every rule of such a policy; we take only the
//     rules that name the group, which is what the admin wrote.
//   - A network resource: the same, from the rules naming the resource.
//
// A rule left without sources is not sent (the client would skip it).

// Route is one route as a peer receives it (NetBird's Route message).
type Route struct {
	ID      string // see above for the per-peer forms
	NetID   string
	Network netip.Prefix // invalid for a domain route
	Domains []string     // punycode; set for domain routes
	// Peer is the routing peer's key; the receiving peer's own key means
	// it serves the route.
	Peer          key.Public
	Metric        int
	Masquerade    bool
	KeepRoute     bool
	SkipAutoApply bool
}

// Dynamic reports whether the route is to domains.
func (r Route) Dynamic() bool { return len(r.Domains) > 0 }

// RouteRule is one route firewall rule for a routing peer.
type RouteRule struct {
	Sources     []netip.Prefix // ordered
	Action      string         // account.ActionAccept or ActionDrop
	Destination netip.Prefix   // invalid for a domain route
	Domains     []string
	Protocol    string
	Ports       []uint16
	Ranges      []account.PortRange
	PolicyID    account.PolicyID // empty for a route without access control groups
	RouteID     string
}

// entry is one route served by one routing peer.
type entry struct {
	r    *account.Route
	id   string
	peer account.PeerID
}

// ha is the highly available group a route belongs to on clients.
func (e entry) ha() string {
	if len(e.r.Domains) > 0 {
		return e.r.NetID + "\x00" + strings.Join(e.r.Domains, ",")
	}
	return e.r.NetID + "\x00" + e.r.Network.String()
}

// srcRule is an enabled rule of an enabled policy with its posture-checked
// source peers (the allow-all rule included).
type srcRule struct {
	r      *account.Rule
	policy account.PolicyID
	src    map[account.PeerID]bool
}

// resource is an enabled network resource with what serves and uses it.
type resource struct {
	res     *account.NetworkResource
	routers map[account.PeerID]*account.NetworkRouter
	rules   []int // into routing.rules: the rules naming the resource
	sources map[account.PeerID]bool
}

// routing is the route-related part of an Index.
type routing struct {
	// config is what the account holds, for PeerLocal.
	routes    []account.Route
	resources []account.NetworkResource
	routers   []account.NetworkRouter
	// groups are the members of the groups routes and routers name.
	groups map[account.GroupID]map[account.PeerID]bool
	rules  []srcRule
	// byRouter: the classic routes each routing peer serves, enabled and
	// disabled (a disabled one still keeps its HA group from the peer).
	byRouter map[account.PeerID][]entry
	serving  []account.PeerID // peers with an enabled entry, ordered
	res      []resource
	byPeer   map[account.PeerID][]int // resources a peer routes or uses
	// links are the peers shown to each other for resources: a client
	// sees the routers, a router the sources.
	links map[account.PeerID]map[account.PeerID]bool
}

// routable reports whether a peer may use or serve routes.
func (ix *Index) routable(id account.PeerID) bool {
	p, ok := ix.byID[id]
	return ok && !p.ApprovalRequired && !p.Temporary
}

// buildRouting prepares the routes of access; members are the resolved
// groups and rules the enabled rules with their sources.
func (ix *Index) buildRouting(access Access, members map[account.GroupID]map[account.PeerID]bool, rules []srcRule) {
	rt := &ix.rt
	rt.routes, rt.resources, rt.routers = access.Routes, access.Resources, access.Routers
	rt.groups = map[account.GroupID]map[account.PeerID]bool{}
	rt.byRouter = map[account.PeerID][]entry{}
	rt.byPeer = map[account.PeerID][]int{}
	rt.links = map[account.PeerID]map[account.PeerID]bool{}
	if len(access.Routes) == 0 && len(access.Resources) == 0 {
		return
	}
	rt.rules = rules
	note := func(gs []account.GroupID) {
		for _, g := range gs {
			rt.groups[g] = members[g]
		}
	}
	for i := range access.Routes {
		r := &access.Routes[i]
		note(r.Groups)
		note(r.PeerGroups)
		if r.Peer != "" {
			if ix.routable(r.Peer) {
				rt.byRouter[r.Peer] = append(rt.byRouter[r.Peer], entry{r: r, id: string(r.ID), peer: r.Peer})
			}
			continue
		}
		seen := map[account.PeerID]bool{}
		for _, g := range r.PeerGroups {
			for id := range members[g] {
				if !seen[id] && ix.routable(id) {
					seen[id] = true
					rt.byRouter[id] = append(rt.byRouter[id], entry{r: r, id: string(r.ID) + ":" + string(id), peer: id})
				}
			}
		}
	}
	for id, es := range rt.byRouter {
		slices.SortFunc(es, func(a, b entry) int { return cmp.Compare(a.id, b.id) })
		if slices.ContainsFunc(es, func(e entry) bool { return e.r.Enabled }) {
			rt.serving = append(rt.serving, id)
		}
	}
	slices.Sort(rt.serving)
	ix.buildResources(access, members)
}

// buildResources resolves each enabled resource to its routers (enabled
// routers of its network; a peer in several keeps the first by ID) and
// the rules naming it.
func (ix *Index) buildResources(access Access, members map[account.GroupID]map[account.PeerID]bool) {
	rt := &ix.rt
	routers := slices.Clone(access.Routers)
	slices.SortFunc(routers, func(a, b account.NetworkRouter) int { return cmp.Compare(a.ID, b.ID) })
	byNet := map[account.NetworkID]map[account.PeerID]*account.NetworkRouter{}
	for i := range routers {
		nr := &routers[i]
		for _, g := range nr.PeerGroups {
			rt.groups[g] = members[g]
		}
		if !nr.Enabled {
			continue
		}
		set := byNet[nr.NetworkID]
		if set == nil {
			set = map[account.PeerID]*account.NetworkRouter{}
			byNet[nr.NetworkID] = set
		}
		add := func(id account.PeerID) {
			if _, dup := set[id]; !dup && ix.routable(id) {
				set[id] = nr
			}
		}
		if nr.Peer != "" {
			add(nr.Peer)
			continue
		}
		for _, g := range nr.PeerGroups {
			for id := range members[g] {
				add(id)
			}
		}
	}
	for i := range access.Resources {
		res := &access.Resources[i]
		if !res.Enabled || res.Type != account.ResourceDomain && !res.Prefix.IsValid() {
			continue
		}
		rs := resource{res: res, routers: byNet[res.NetworkID], sources: map[account.PeerID]bool{}}
		// A v6 destination exists only between v6-active peers (v6.go):
		// the others must not even see each other for it, so their maps
		// stay those of the account without the resource.
		v6 := isV6(res.Prefix)
		if v6 {
			rs.routers = map[account.PeerID]*account.NetworkRouter{}
			for id, nr := range byNet[res.NetworkID] {
				if ix.v6[id] {
					rs.routers[id] = nr
				}
			}
		}
		for j := range rt.rules {
			sr := &rt.rules[j]
			if sr.r.DestinationResource != res.ID && !slices.ContainsFunc(sr.r.Destinations, func(g account.GroupID) bool { return slices.Contains(res.Groups, g) }) {
				continue
			}
			rs.rules = append(rs.rules, j)
			for id := range sr.src {
				if ix.routable(id) && (!v6 || ix.v6[id]) {
					rs.sources[id] = true
				}
			}
		}
		if len(rs.rules) == 0 || len(rs.routers) == 0 {
			continue
		}
		n := len(rt.res)
		rt.res = append(rt.res, rs)
		for id := range rs.routers {
			rt.byPeer[id] = append(rt.byPeer[id], n)
		}
		for id := range rs.sources {
			if _, router := rs.routers[id]; !router {
				rt.byPeer[id] = append(rt.byPeer[id], n)
				for r := range rs.routers {
					rt.link(id, r)
				}
			}
		}
	}
}

func (rt *routing) link(client, router account.PeerID) {
	for _, p := range [2][2]account.PeerID{{client, router}, {router, client}} {
		if rt.links[p[0]] == nil {
			rt.links[p[0]] = map[account.PeerID]bool{}
		}
		rt.links[p[0]][p[1]] = true
	}
}

// sees reports whether self's policies show it other (without links).
func (ix *Index) sees(self, other account.PeerID) bool {
	if ix.allowAll && !ix.temp[self] && !ix.temp[other] {
		return true
	}
	for _, i := range ix.byPeer[self] {
		rr := &ix.rules[i]
		if rr.r.Action == account.ActionAccept && (rr.src[self] && rr.dst[other] || rr.dst[self] && rr.src[other]) {
			return true
		}
	}
	return false
}

// routesOf returns self's routes and, with rules, its route firewall
// rules, both ordered.
func (ix *Index) routesOf(self account.PeerID, rules bool) ([]Route, []RouteRule) {
	rt := &ix.rt
	if !ix.routable(self) || len(rt.byRouter)+len(rt.res) == 0 {
		return nil, nil
	}
	var routes []Route
	var rrs []RouteRule
	selfV6 := ix.v6[self]
	// usable: what self may route through router: v6 destinations only
	// when both are v6-active (v6.go).
	usable := func(r Route, router account.PeerID) bool { return !isV6(r.Network) || selfV6 && ix.v6[router] }
	// add adds a route and, for two v6-active ends, its ::/0 mirror.
	add := func(r Route, router account.PeerID) {
		routes = append(routes, r)
		if isDefaultV4(r.Network) && selfV6 && ix.v6[router] {
			routes = append(routes, mirror(r))
		}
	}
	own := map[string]bool{}
	for _, e := range rt.byRouter[self] {
		own[e.ha()] = true
		if r := ix.classic(e); e.r.Enabled && usable(r, self) {
			add(r, self)
			if rules {
				rrs = append(rrs, ix.classicRules(self, e)...)
			}
		}
	}
	for _, r := range rt.serving {
		if r == self || !ix.sees(self, r) {
			continue
		}
		for _, e := range rt.byRouter[r] {
			if e.r.Enabled && !own[e.ha()] && slices.ContainsFunc(e.r.Groups, func(g account.GroupID) bool { return rt.groups[g][self] }) {
				if cr := ix.classic(e); usable(cr, r) {
					add(cr, r)
				}
			}
		}
	}
	for _, i := range rt.byPeer[self] {
		rs := &rt.res[i]
		if nr, router := rs.routers[self]; router {
			if rr := ix.resourceRoute(rs, self, nr); usable(rr, self) {
				add(rr, self)
				if rules {
					rrs = append(rrs, ix.resourceRules(self, rs, rr)...)
				}
			}
			continue
		}
		for id, nr := range rs.routers {
			if rr := ix.resourceRoute(rs, id, nr); usable(rr, id) {
				add(rr, id)
			}
		}
	}
	slices.SortFunc(routes, func(a, b Route) int { return cmp.Compare(a.ID, b.ID) })
	slices.SortStableFunc(rrs, func(a, b RouteRule) int {
		return cmp.Or(cmp.Compare(a.RouteID, b.RouteID), cmp.Compare(a.PolicyID, b.PolicyID))
	})
	return routes, rrs
}

func (ix *Index) classic(e entry) Route {
	return Route{ID: e.id, NetID: e.r.NetID, Network: e.r.Network, Domains: e.r.Domains, Peer: ix.byID[e.peer].Key,
		Metric: e.r.Metric, Masquerade: e.r.Masquerade, KeepRoute: e.r.KeepRoute, SkipAutoApply: e.r.SkipAutoApply}
}

var anyV4 = netip.PrefixFrom(netip.IPv4Unspecified(), 0)

// v6Twin is, for a route self serves as a v6-active routing peer, where
// the v6 twin of its firewall rules goes (see v6.go): ::/0 under the
// mirror's ID for a 0.0.0.0/0 route, the same destination and ID for a
// domain route; ok=false for other routes and other routing peers.
func (ix *Index) v6Twin(self account.PeerID, dst netip.Prefix, domains []string, routeID string) (netip.Prefix, string, bool) {
	switch {
	case !ix.v6[self]:
		return netip.Prefix{}, "", false
	case isDefaultV4(dst):
		return anyV6, routeID + mirrorIDSuffix, true
	case len(domains) > 0:
		return dst, routeID, true
	}
	return netip.Prefix{}, "", false
}

// classicRules are the route firewall rules of a route self serves.
func (ix *Index) classicRules(self account.PeerID, e entry) []RouteRule {
	twinDst, twinID, twin := ix.v6Twin(self, e.r.Network, e.r.Domains, e.id)
	if len(e.r.AccessControlGroups) == 0 {
		src := anyV4
		if isV6(e.r.Network) {
			src = anyV6
		}
		out := []RouteRule{{Sources: []netip.Prefix{src}, Action: account.ActionAccept, Destination: e.r.Network, Domains: e.r.Domains,
			Protocol: account.ProtoAll, RouteID: e.id}}
		if twin {
			out = append(out, RouteRule{Sources: []netip.Prefix{anyV6}, Action: account.ActionAccept, Destination: twinDst, Domains: e.r.Domains,
				Protocol: account.ProtoAll, RouteID: twinID})
		}
		return out
	}
	dist := func(id account.PeerID) bool {
		return slices.ContainsFunc(e.r.Groups, func(g account.GroupID) bool { return ix.rt.groups[g][id] })
	}
	var out []RouteRule
	// Once per rule, even when its destinations name several of the
	// route's access control groups.
	for j := range ix.rt.rules {
		sr := &ix.rt.rules[j]
		if slices.ContainsFunc(e.r.AccessControlGroups, func(g account.GroupID) bool { return slices.Contains(sr.r.Destinations, g) }) {
			out = ix.appendRule(out, self, sr, dist, e.r.Network, e.r.Domains, e.id, isV6(e.r.Network))
			if twin {
				out = ix.appendRule(out, self, sr, dist, twinDst, e.r.Domains, twinID, true)
			}
		}
	}
	return out
}

func (ix *Index) resourceRoute(rs *resource, router account.PeerID, nr *account.NetworkRouter) Route {
	r := Route{ID: string(rs.res.ID) + ":" + string(router), NetID: rs.res.Name, Peer: ix.byID[router].Key,
		Metric: nr.Metric, Masquerade: nr.Masquerade, KeepRoute: true}
	if rs.res.Type == account.ResourceDomain {
		r.Domains = []string{rs.res.Domain}
	} else {
		r.Network = rs.res.Prefix
	}
	return r
}

func (ix *Index) resourceRules(self account.PeerID, rs *resource, r Route) []RouteRule {
	var out []RouteRule
	all := func(account.PeerID) bool { return true }
	twinDst, twinID, twin := ix.v6Twin(self, r.Network, r.Domains, r.ID)
	for _, j := range rs.rules {
		out = ix.appendRule(out, self, &ix.rt.rules[j], all, r.Network, r.Domains, r.ID, isV6(r.Network))
		if twin {
			out = ix.appendRule(out, self, &ix.rt.rules[j], all, twinDst, r.Domains, twinID, true)
		}
	}
	return out
}

// appendRule adds the route firewall rule sr gives for a destination,
// from its sources that pass keep (never self); none: nothing. With v6
// the sources are the v6-active ones, as /128s; otherwise /32s.
func (ix *Index) appendRule(out []RouteRule, self account.PeerID, sr *srcRule, keep func(account.PeerID) bool,
	dst netip.Prefix, domains []string, routeID string, v6 bool) []RouteRule {
	var src []netip.Prefix
	for id := range sr.src {
		if id == self || !ix.routable(id) || !keep(id) {
			continue
		}
		switch {
		case !v6:
			src = append(src, netip.PrefixFrom(ix.byID[id].IP, 32))
		case ix.v6[id]:
			src = append(src, netip.PrefixFrom(ix.byID[id].IPv6, 128))
		}
	}
	if len(src) == 0 {
		return out
	}
	slices.SortFunc(src, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	return append(out, RouteRule{Sources: src, Action: sr.r.Action, Destination: dst, Domains: domains, Protocol: sr.r.Protocol,
		Ports: sr.r.Ports, Ranges: sr.r.PortRanges, PolicyID: sr.policy, RouteID: routeID})
}

// routeSig summarizes self's routes, route rules and the peers its
// resources show it.
func (ix *Index) routeSig(self account.PeerID) sig128 {
	routes, rules := ix.routesOf(self, true)
	var h sig128
	for _, r := range routes {
		h = h.add(newSig(fmt.Sprintf("%+v", r)).mix(7))
	}
	for _, r := range rules {
		h = h.add(newSig(fmt.Sprintf("%+v", r)).mix(8))
	}
	for id := range ix.rt.links[self] {
		h = h.add(ix.records[id].mix(9))
	}
	return h
}

// SameRoutes reports whether self's routes, route firewall rules and
// resource peers are the same in both states (a map delta carries none of
// them: when they differ the peer needs its whole map).
func SameRoutes(old, cur *Index, self account.PeerID) bool {
	return old.routeSig(self) == cur.routeSig(self)
}

// sameRouting reports whether two states hold the same routes, resources
// and routers, with the same members in the groups they name apart from
// the changed peers.
func sameRouting(old, cur *routing, changed map[account.PeerID]bool) bool {
	if !same(old.routes, cur.routes) || !same(old.resources, cur.resources) ||
		!same(old.routers, cur.routers) || len(old.groups) != len(cur.groups) {
		return false
	}
	for g, a := range old.groups {
		b, ok := cur.groups[g]
		if !ok || !sameExcept(a, b, changed) {
			return false
		}
	}
	return true
}

// same compares two lists, nil and empty alike.
func same[T any](a, b []T) bool { return len(a) == 0 && len(b) == 0 || reflect.DeepEqual(a, b) }
