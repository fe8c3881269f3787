// Package networkmap computes what one peer must know about its account: its
// own config, the peers its access policies let it talk to, and the
// firewall rules for its side. It is a pure function of account state; it
// does not load state or encode protobuf (package grpcapi does that at the
// boundary).
package networkmap

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"sort"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/posture"
)

// Direction of a firewall rule, seen from the peer that installs it.
type Direction int

// Directions.
const (
	In  Direction = iota // connections from Peer to us
	Out                  // connections from us to Peer
)

// FirewallRule is one rule for the peer's own firewall.
type FirewallRule struct {
	Peer      netip.Addr // the remote peer
	Direction Direction
	Action    string // account.ActionAccept or ActionDrop
	Protocol  string // account.Proto*
	Ports     []uint16
	Ranges    []account.PortRange
	PolicyID  account.PolicyID
}

// Map is one peer's view of its network.
type Map struct {
	Serial  uint64
	Domain  string
	Network netip.Prefix
	Self    account.Peer
	// NetworkV6 is the account's IPv6 overlay and SelfV6 whether self is
	// v6-active (v6.go). V6 are then the v6-active peers, of which m shows
	// the v6 address (nil when self is not v6-active); it is the Index's,
	// never changed: do not modify it.
	NetworkV6 netip.Prefix
	SelfV6    bool
	V6        map[account.PeerID]bool
	// Peers it may talk to, ordered by IP. They point into the Index they
	// came from, which is never changed: do not modify them.
	Peers []*account.Peer
	// AllowAll means every peer may reach this one and be reached by it
	// on everything (an enabled All-to-All accept rule): the rules are then
	// sent in their compact form.
	AllowAll bool
	Rules    []FirewallRule
	// CheckFiles are the paths the peer must report on for the account's
	// process posture checks.
	CheckFiles []string
	// Flags are the account settings the peer's client applies.
	Flags Flags
	// Routes are the routes the peer uses or serves, by ID; RouteRules
	// the route firewall rules of those it serves (see routes.go).
	Routes     []Route
	RouteRules []RouteRule
	// DNS is what the peer's resolver gets besides the peer zone (see
	// dns.go).
	DNS DNS
	// ForwarderPort is where routing peers answer the names of the domain
	// resources they route (forwarder.go); every map carries it.
	ForwarderPort uint16
}

// Flags are the account settings passed to clients in their peer config.
type Flags struct {
	// LazyConnection: connect to a peer only when traffic needs it.
	LazyConnection bool
	// RoutingPeerDNS: routing peers resolve DNS for the routes they serve.
	RoutingPeerDNS bool
}

// FlagsOf returns the client-facing flags of an account's settings.
func FlagsOf(s account.Settings) Flags {
	return Flags{LazyConnection: s.LazyConnectionEnabled, RoutingPeerDNS: s.RoutingPeerDNSResolutionEnabled}
}

func (f Flags) String() string {
	return fmt.Sprintf("lazy=%t,rdns=%t", f.LazyConnection, f.RoutingPeerDNS)
}

// Address is the peer's overlay address with the account's prefix length,
// printed exactly as the client compares it (netip.Prefix.String()).
func (m Map) Address() string {
	return netip.PrefixFrom(m.Self.IP, m.Network.Bits()).String()
}

// Access is an account's groups, policies and posture checks, the
// routes and network resources (with their routers) they give access to,
// and the account's DNS: nameserver groups, DNS settings and custom zones
// (each with its records), in the store's order.
type Access struct {
	Groups           []account.Group
	Policies         []account.Policy
	PostureChecks    []account.PostureCheck
	Routes           []account.Route
	Resources        []account.NetworkResource
	Routers          []account.NetworkRouter
	NameserverGroups []account.NameserverGroup
	DNSSettings      account.DNSSettings
	Zones            []account.Zone
}

// members resolves each group to its peers (All: every peer but the
// temporary ones). Peers pending approval belong to no group: no rule
// names them.
func (a Access) members(peers []account.Peer) map[account.GroupID]map[account.PeerID]bool {
	known := make(map[account.PeerID]bool, len(peers))
	every := make(map[account.PeerID]bool, len(peers))
	for _, p := range peers {
		if !p.ApprovalRequired {
			known[p.ID] = true
			if !p.Temporary {
				every[p.ID] = true
			}
		}
	}
	out := make(map[account.GroupID]map[account.PeerID]bool, len(a.Groups))
	for _, g := range a.Groups {
		set := map[account.PeerID]bool{}
		if g.All {
			set = every
		} else {
			for _, id := range g.Peers {
				if known[id] {
					set[id] = true
				}
			}
		}
		out[g.ID] = set
	}
	return out
}

func isAll(groups []account.GroupID, all map[account.GroupID]bool) bool {
	for _, g := range groups {
		if all[g] {
			return true
		}
	}
	return false
}

// Compute returns the map of self given the account, all its peers and its
// access policies. It returns ok=false if self is not among peers. To
// compute the maps of many peers of one account state, build an Index once.
func Compute(acc account.Account, peers []account.Peer, access Access, self account.PeerID) (Map, bool) {
	return NewIndex(acc, peers, access).Compute(self)
}

// rule is an enabled rule of an enabled policy, resolved to peers.
type rule struct {
	r        account.Rule
	policy   account.PolicyID
	src, dst map[account.PeerID]bool
	sig      sig128 // the rule and the records of every peer it names
}

// Index is one account state prepared for computing many peers' maps:
// group members resolved once, and for each peer the rules that name it,
// so one peer's map costs what its own rules reach, not the whole account.
type Index struct {
	acc      account.Account
	peers    []account.Peer         // by IP
	pos      map[account.PeerID]int // index into peers
	byID     map[account.PeerID]account.Peer
	allowAll bool
	rules    []rule
	byPeer   map[account.PeerID][]int // rules naming the peer as source or destination
	records  map[account.PeerID]sig128
	everyone sig128 // all peers' records, for allow-all maps
	checks   []account.PostureCheck
	// temp are the temporary peers (not pending): outside allow-all, seen
	// only through the rules that name them. expand are the peers such a
	// rule pairs them with: under allow-all their maps are sent in full
	// (allow-all spelled out per peer), so that a temporary peer gets only
	// the ports its rules give. allowAllPolicy names the allow-all rule's
	// policy in those spelled-out rules.
	temp, expand   map[account.PeerID]bool
	allowAllPolicy account.PolicyID
	rt             routing
	dns            dnsIndex
	v6             map[account.PeerID]bool // the v6-active peers (v6.go)
	fwdPort        uint16                  // see forwarderPort
}

// NewIndex prepares an account state.
func NewIndex(acc account.Account, peers []account.Peer, access Access) *Index {
	ix := &Index{acc: acc, peers: slices.Clone(peers), byID: make(map[account.PeerID]account.Peer, len(peers)), byPeer: map[account.PeerID][]int{},
		temp: map[account.PeerID]bool{}, expand: map[account.PeerID]bool{}}
	sort.Slice(ix.peers, func(i, j int) bool { return ix.peers[i].IP.Less(ix.peers[j].IP) })
	ix.pos = make(map[account.PeerID]int, len(ix.peers))
	for i := range ix.peers {
		ix.pos[ix.peers[i].ID] = i
	}
	for _, p := range peers {
		ix.byID[p.ID] = p
	}
	members := access.members(peers)
	ix.v6 = v6Peers(acc, ix.byID, members)
	ix.records = make(map[account.PeerID]sig128, len(peers))
	for _, p := range peers {
		r := record(p, ix.v6[p.ID])
		ix.records[p.ID] = r
		if p.Temporary && !p.ApprovalRequired {
			ix.temp[p.ID] = true
			continue // no allow-all map shows it
		}
		ix.everyone = ix.everyone.add(r)
	}
	allGroups := map[account.GroupID]bool{}
	for _, g := range access.Groups {
		if g.All {
			allGroups[g.ID] = true
		}
	}
	union := func(gs []account.GroupID) map[account.PeerID]bool {
		if len(gs) == 1 {
			return members[gs[0]]
		}
		out := map[account.PeerID]bool{}
		for _, g := range gs {
			for id := range members[g] {
				out[id] = true
			}
		}
		return out
	}
	ix.checks = access.PostureChecks
	// side resolves one side of a rule: a single peer, or its groups.
	side := func(gs []account.GroupID, peer account.PeerID) map[account.PeerID]bool {
		if peer != "" {
			if p, ok := ix.byID[peer]; ok && !p.ApprovalRequired {
				return map[account.PeerID]bool{peer: true}
			}
			return map[account.PeerID]bool{}
		}
		return union(gs)
	}
	checks := make(map[account.PostureCheckID]account.Checks, len(access.PostureChecks))
	for _, c := range access.PostureChecks {
		checks[c.ID] = c.Checks
	}
	var srcRules []srcRule // for routes and resources
	for _, pol := range access.Policies {
		if !pol.Enabled {
			continue
		}
		for _, r := range pol.Rules {
			if !r.Enabled {
				continue
			}
			if len(pol.PostureChecks) == 0 && r.Action == account.ActionAccept && r.Protocol == account.ProtoAll && r.Bidirectional &&
				isAll(r.Sources, allGroups) && isAll(r.Destinations, allGroups) {
				if !ix.allowAll {
					ix.allowAll, ix.allowAllPolicy = true, pol.ID
				}
				srcRules = append(srcRules, srcRule{r: &r, policy: pol.ID, src: side(r.Sources, r.SourcePeer)})
				continue
			}
			rr := rule{r: r, policy: pol.ID, src: side(r.Sources, r.SourcePeer), dst: side(r.Destinations, r.DestinationPeer)}
			if len(pol.PostureChecks) > 0 {
				rr.src = ix.passing(rr.src, pol.PostureChecks, checks)
			}
			srcRules = append(srcRules, srcRule{r: &r, policy: pol.ID, src: rr.src})
			rr.sig = ruleSig(pol.ID, r)
			for id := range rr.src {
				rr.sig = rr.sig.add(ix.records[id].mix(1))
			}
			for id := range rr.dst {
				rr.sig = rr.sig.add(ix.records[id].mix(2))
			}
			n := len(ix.rules)
			ix.rules = append(ix.rules, rr)
			for id := range rr.src {
				ix.byPeer[id] = append(ix.byPeer[id], n)
			}
			for id := range rr.dst {
				if !rr.src[id] {
					ix.byPeer[id] = append(ix.byPeer[id], n)
				}
			}
			ix.pairTemporary(rr)
		}
	}
	ix.buildRouting(access, members, srcRules)
	ix.buildDNS(access, members)
	ix.fwdPort = forwarderPort(peers)
	return ix
}

// pairTemporary marks the peers a rule pairs with a temporary peer.
func (ix *Index) pairTemporary(rr rule) {
	if len(ix.temp) == 0 {
		return
	}
	mark := func(side, other map[account.PeerID]bool) {
		for id := range side {
			if !ix.temp[id] {
				continue
			}
			for o := range other {
				if !ix.temp[o] {
					ix.expand[o] = true
				}
			}
			return
		}
	}
	mark(rr.src, rr.dst)
	mark(rr.dst, rr.src)
}

// compact reports whether self's map is sent in allow-all form.
func (ix *Index) compact(self account.PeerID) bool {
	return ix.allowAll && !ix.temp[self] && !ix.expand[self]
}

// spelled reports whether self's map spells allow-all out per peer.
func (ix *Index) spelled(self account.PeerID) bool {
	return ix.allowAll && !ix.temp[self] && ix.expand[self]
}

// allowAllRules are allow-all spelled out for one remote peer.
func (ix *Index) allowAllRules(remote netip.Addr) []FirewallRule {
	return []FirewallRule{
		{Peer: remote, Direction: In, Action: account.ActionAccept, Protocol: account.ProtoAll, PolicyID: ix.allowAllPolicy},
		{Peer: remote, Direction: Out, Action: account.ActionAccept, Protocol: account.ProtoAll, PolicyID: ix.allowAllPolicy},
	}
}

// passing keeps the source peers that meet every posture check a policy
// names (a check that no longer exists fails closed).
func (ix *Index) passing(src map[account.PeerID]bool, ids []string, checks map[account.PostureCheckID]account.Checks) map[account.PeerID]bool {
	out := make(map[account.PeerID]bool, len(src))
	for id := range src {
		ok := true
		for _, c := range ids {
			cs, known := checks[account.PostureCheckID(c)]
			if !known {
				ok = false
				break
			}
			if pass, _ := posture.Passes(cs, ix.byID[id].Meta); !pass {
				ok = false
				break
			}
		}
		if ok {
			out[id] = true
		}
	}
	return out
}

// Signature summarizes everything self's map depends on: the account's
// network and domain, self's own record, and for each rule naming self the
// rule and the records of the peers it names (or, under allow-all, every
// peer's record). Equal signatures mean equal maps, so a stream whose
// signature did not change skips the computation: after a change, the work
// is proportional to the peers it affects.
func (ix *Index) Signature(self account.PeerID) (Sig, bool) {
	me, ok := ix.records[self]
	if !ok {
		return Sig{}, false
	}
	h := newSig(ix.acc.Domain, ix.acc.Network.String(), ix.acc.NetworkV6.String(), FlagsOf(ix.acc.Settings).String(), fmt.Sprint(ix.fwdPort)).add(me.mix(3))
	if len(ix.checks) > 0 {
		h = h.add(newSig(posture.Files(ix.checks, ix.byID[self].Meta.GoOS)...).mix(6))
	}
	if ix.allowAll {
		h = h.add(ix.everyone.mix(4))
	}
	for _, i := range ix.byPeer[self] {
		h = h.add(ix.rules[i].sig.mix(5))
	}
	if len(ix.rt.byRouter)+len(ix.rt.res) > 0 {
		h = h.add(ix.routeSig(self))
	}
	h = h.add(ix.dnsSig(self).mix(12))
	return Sig(h), true
}

// Sig is a map signature (see Index.Signature).
type Sig sig128

// sig128 is an order-independent 128-bit sum of hashes.
type sig128 struct{ a, b uint64 }

func (s sig128) add(o sig128) sig128 { return sig128{s.a + o.a, s.b + o.b} }

// mix makes the same value count differently in different roles.
func (s sig128) mix(role uint64) sig128 {
	return sig128{splitmix(s.a ^ role*0x9e3779b97f4a7c15), splitmix(s.b ^ role*0xbf58476d1ce4e5b9)}
}

func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

func newSig(parts ...string) sig128 {
	a, b := fnv.New64a(), fnv.New64()
	for _, p := range parts {
		a.Write([]byte(p))
		a.Write([]byte{0})
		b.Write([]byte(p))
		b.Write([]byte{0})
	}
	return sig128{a.Sum64(), b.Sum64()}
}

// record covers what a map shows of a peer, and whether it is shown at all
// (a peer pending approval is not). SSHEnabled is in its own map only, but
// counting it here makes a switch of it reach that map. v6 is whether the
// peer is v6-active (its v6 address is shown then only).
func record(p account.Peer, v6 bool) sig128 {
	v6addr := ""
	if v6 {
		v6addr = p.IPv6.String()
	}
	return newSig(string(p.ID), p.IP.String(), p.Key.String(), p.DNSLabel, p.SSHPubKey, p.Name, fmt.Sprint(p.ApprovalRequired, p.SSHEnabled), v6addr)
}

func ruleSig(pol account.PolicyID, r account.Rule) sig128 {
	return newSig(string(pol), r.ID, r.Action, r.Protocol, fmt.Sprint(r.Bidirectional, r.Ports, r.PortRanges), string(r.SourcePeer), string(r.DestinationPeer))
}

// Compute returns the map of self (ok=false if self is not a peer).
//
// A peer sees a remote peer when an enabled accept rule of an enabled
// policy lets either of them connect to the other. Its firewall gets, per
// such rule, an Out rule towards each destination it may reach and an In
// rule from each source that may reach it (both ways when bidirectional);
// drop rules are passed on the same way and win in the agent.
//
// A peer pending approval gets its own config only: no peers, no rules
// (so its firewall admits nothing), and no other peer's map lists it.
func (ix *Index) Compute(self account.PeerID) (Map, bool) { return ix.compute(self, true) }

// Reachable is Compute's Peers alone: the same peers, without building
// and sorting the firewall rules (what the REST API counts per peer).
func (ix *Index) Reachable(self account.PeerID) ([]*account.Peer, bool) {
	m, ok := ix.compute(self, false)
	return m.Peers, ok
}

// compute builds self's map; without rules, m.Rules stays empty.
func (ix *Index) compute(self account.PeerID, rules bool) (Map, bool) {
	me, ok := ix.byID[self]
	if !ok {
		return Map{}, false
	}
	m := Map{Serial: ix.acc.Serial, Domain: ix.acc.Domain, Network: ix.acc.Network, Self: me, AllowAll: ix.compact(self),
		CheckFiles: posture.Files(ix.checks, me.Meta.GoOS), Flags: FlagsOf(ix.acc.Settings), ForwarderPort: ix.fwdPort,
		NetworkV6: ix.acc.NetworkV6, SelfV6: ix.v6[self]}
	if m.SelfV6 {
		m.V6 = ix.v6
	}
	if rules {
		m.DNS = ix.dnsOf(self)
	}
	if me.ApprovalRequired {
		m.AllowAll = false
		return m, true
	}
	visible := map[account.PeerID]bool{}
	if ix.spelled(self) {
		for i := range ix.peers {
			if p := &ix.peers[i]; p.ID != self && !p.ApprovalRequired && !ix.temp[p.ID] {
				visible[p.ID] = true
				if rules {
					rs := ix.allowAllRules(p.IP)
					m.Rules = append(m.Rules, rs...)
					m.Rules = append(m.Rules, ix.v6Rules(m.SelfV6, p.ID, rs)...)
				}
			}
		}
	}
	add := func(dir Direction, remote account.PeerID, rr *rule) {
		if remote == self {
			return
		}
		if rr.r.Action == account.ActionAccept {
			visible[remote] = true
		}
		if !rules || (m.AllowAll && rr.r.Action == account.ActionAccept) {
			return // everything is allowed both ways: only drop rules matter
		}
		fr := FirewallRule{Peer: ix.byID[remote].IP, Direction: dir, Action: rr.r.Action, Protocol: rr.r.Protocol,
			Ports: rr.r.Ports, Ranges: rr.r.PortRanges, PolicyID: rr.policy}
		m.Rules = append(m.Rules, fr)
		if m.SelfV6 && ix.v6[remote] {
			fr.Peer = ix.byID[remote].IPv6 // its v6 twin
			m.Rules = append(m.Rules, fr)
		}
	}
	for _, i := range ix.byPeer[self] {
		rr := &ix.rules[i]
		if m.AllowAll && rr.r.Action == account.ActionAccept {
			// Every peer is visible and allowed: such a rule adds nothing,
			// and walking its groups would cost O(N) per map.
			continue
		}
		if rr.src[self] {
			for id := range rr.dst {
				add(Out, id, rr)
				if rr.r.Bidirectional {
					add(In, id, rr)
				}
			}
		}
		if rr.dst[self] {
			for id := range rr.src {
				add(In, id, rr)
				if rr.r.Bidirectional {
					add(Out, id, rr)
				}
			}
		}
	}
	for id := range ix.rt.links[self] {
		visible[id] = true // a router it uses, or a source it serves
	}
	if rules {
		m.Routes, m.RouteRules = ix.routesOf(self, true)
	}
	if m.AllowAll {
		for i := range ix.peers {
			if p := &ix.peers[i]; p.ID != self && !p.ApprovalRequired && (!ix.temp[p.ID] || visible[p.ID]) {
				m.Peers = append(m.Peers, p)
			}
		}
	} else {
		// Only the visible peers, in the index's (IP) order: walking every
		// peer of the account here made each map O(N), a listing O(N²).
		at := make([]int, 0, len(visible))
		for id := range visible {
			if i, ok := ix.pos[id]; ok && id != self && !ix.peers[i].ApprovalRequired {
				at = append(at, i)
			}
		}
		slices.Sort(at)
		for _, i := range at {
			m.Peers = append(m.Peers, &ix.peers[i])
		}
	}
	slices.SortStableFunc(m.Rules, func(a, b FirewallRule) int {
		if a.Peer != b.Peer {
			return a.Peer.Compare(b.Peer)
		}
		if a.Direction != b.Direction {
			return cmp.Compare(a.Direction, b.Direction)
		}
		return cmp.Compare(a.PolicyID, b.PolicyID)
	})
	m.Rules = dedupe(m.Rules)
	return m, true
}

func dedupe(rs []FirewallRule) []FirewallRule {
	return slices.CompactFunc(rs, func(a, b FirewallRule) bool {
		return a.Peer == b.Peer && a.Direction == b.Direction && a.Action == b.Action && a.Protocol == b.Protocol &&
			slices.Equal(a.Ports, b.Ports) && slices.Equal(a.Ranges, b.Ranges)
	})
}
