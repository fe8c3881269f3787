// Package networkmap computes what one peer must know about its account: its
// own config, the peers its access policies let it talk to, and the
// firewall rules for its side. It is a pure function of account state; it
// does not load state or encode protobuf (package grpcapi does that at the
// boundary).
package networkmap

import (
	"net/netip"
	"slices"
	"sort"

	"github.com/wiremesh/wiremesh/management/account"
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
	Peers   []account.Peer // remote peers it may talk to, ordered by IP
	// AllowAll means every peer may reach this one and be reached by it
	// on everything (an enabled All-to-All accept rule): the rules are then
	// sent in their compact form.
	AllowAll bool
	Rules    []FirewallRule
}

// Address is the peer's overlay address with the account's prefix length,
// printed exactly as the client compares it (netip.Prefix.String()).
func (m Map) Address() string {
	return netip.PrefixFrom(m.Self.IP, m.Network.Bits()).String()
}

// Access is an account's groups and policies.
type Access struct {
	Groups   []account.Group
	Policies []account.Policy
}

// members resolves each group to its peers (All: every peer).
func (a Access) members(peers []account.Peer) map[account.GroupID]map[account.PeerID]bool {
	known := make(map[account.PeerID]bool, len(peers))
	for _, p := range peers {
		known[p.ID] = true
	}
	out := make(map[account.GroupID]map[account.PeerID]bool, len(a.Groups))
	for _, g := range a.Groups {
		set := map[account.PeerID]bool{}
		if g.All {
			set = known
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

func inAny(groups []account.GroupID, m map[account.GroupID]map[account.PeerID]bool, id account.PeerID) bool {
	for _, g := range groups {
		if m[g][id] {
			return true
		}
	}
	return false
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
// access policies. It returns ok=false if self is not among peers.
//
// A peer sees a remote peer when an enabled accept rule of an enabled
// policy lets either of them connect to the other. Its firewall gets, per
// such rule, an Out rule towards each destination it may reach and an In
// rule from each source that may reach it (both ways when bidirectional);
// drop rules are passed on the same way and win in the agent.
func Compute(acc account.Account, peers []account.Peer, access Access, self account.PeerID) (Map, bool) {
	m := Map{Serial: acc.Serial, Domain: acc.Domain, Network: acc.Network}
	byID := make(map[account.PeerID]account.Peer, len(peers))
	found := false
	for _, p := range peers {
		byID[p.ID] = p
		if p.ID == self {
			m.Self, found = p, true
		}
	}
	if !found {
		return Map{}, false
	}
	members := access.members(peers)
	allGroups := map[account.GroupID]bool{}
	for _, g := range access.Groups {
		if g.All {
			allGroups[g.ID] = true
		}
	}
	visible := map[account.PeerID]bool{}
	add := func(dir Direction, remote account.PeerID, r account.Rule, pol account.PolicyID) {
		if remote == self {
			return
		}
		if r.Action == account.ActionAccept {
			visible[remote] = true
		}
		m.Rules = append(m.Rules, FirewallRule{Peer: byID[remote].IP, Direction: dir, Action: r.Action, Protocol: r.Protocol,
			Ports: r.Ports, Ranges: r.PortRanges, PolicyID: pol})
	}
	for _, pol := range access.Policies {
		if !pol.Enabled {
			continue
		}
		for _, r := range pol.Rules {
			if !r.Enabled {
				continue
			}
			if r.Action == account.ActionAccept && r.Protocol == account.ProtoAll && r.Bidirectional &&
				isAll(r.Sources, allGroups) && isAll(r.Destinations, allGroups) {
				m.AllowAll = true
				continue
			}
			src, dst := inAny(r.Sources, members, self), inAny(r.Destinations, members, self)
			if !src && !dst {
				continue
			}
			for _, p := range peers {
				if src && inAny(r.Destinations, members, p.ID) {
					add(Out, p.ID, r, pol.ID)
					if r.Bidirectional {
						add(In, p.ID, r, pol.ID)
					}
				}
				if dst && inAny(r.Sources, members, p.ID) {
					add(In, p.ID, r, pol.ID)
					if r.Bidirectional {
						add(Out, p.ID, r, pol.ID)
					}
				}
			}
		}
	}
	for _, p := range peers {
		if p.ID != self && (m.AllowAll || visible[p.ID]) {
			m.Peers = append(m.Peers, p)
		}
	}
	if m.AllowAll {
		// Everything is allowed both ways: only drop rules still matter.
		m.Rules = slices.DeleteFunc(m.Rules, func(r FirewallRule) bool { return r.Action == account.ActionAccept })
	}
	sort.Slice(m.Peers, func(i, j int) bool { return m.Peers[i].IP.Less(m.Peers[j].IP) })
	sort.SliceStable(m.Rules, func(i, j int) bool { return m.Rules[i].Peer.Less(m.Rules[j].Peer) })
	m.Rules = dedupe(m.Rules)
	return m, true
}

func dedupe(rs []FirewallRule) []FirewallRule {
	return slices.CompactFunc(rs, func(a, b FirewallRule) bool {
		return a.Peer == b.Peer && a.Direction == b.Direction && a.Action == b.Action && a.Protocol == b.Protocol &&
			slices.Equal(a.Ports, b.Ports) && slices.Equal(a.Ranges, b.Ranges)
	})
}
