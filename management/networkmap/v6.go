package networkmap

import (
	"net/netip"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
)

// The IPv6 overlay, as NetBird's management server delivers it. A peer is
// v6-active when it has an address inside the account's NetworkV6, its
// agent supports the overlay (Peer.SupportsIPv6: capability IPv6Overlay,
// no --disable-ipv6) and one of the account's Settings.IPv6EnabledGroups
// holds it. Only then:
//
//   - its PeerConfig carries address_v6 (AddressV6), and Login gives the
//     same (V6Active), or the official client restarts its engine in a loop;
//   - the maps of other v6-active peers list its /128 beside its /32, get
//     a v6 twin of every firewall rule about it (Peer its v6 address) and,
//     for a whole map, an AAAA record beside its A record;
//   - its own map gets the v6 twin of the allow-all rule (source ::/0), v6
//     routes (NetworkType 2) of v6-active routing peers, and each 0.0.0.0/0
//     route (classic or network resource) of a v6-active routing peer
//     mirrored as ::/0: ID "<id>-v6-default", NetID "<netid>-v6" (NetBird's
//     clients pair such a NetID with its v4 base, so selecting the exit
//     node selects both);
//   - as a routing peer, its route firewall rules get v6 sources: for a v6
//     route, the /128s of the v6-active sources (::/0 without access
//     control groups); for a 0.0.0.0/0 route a twin to ::/0 (RouteID
//     "<id>-v6-default"); for a domain route a twin with the v6 sources
//     and the same RouteID.
//
// NetBird delivers v6 routes to every v6-capable client whatever its
// routing peer; we also require the routing peer to be v6-active: without
// the overlay it would not accept the client's v6 packets (the client's
// /128 is not among its WireGuard allowed IPs) and the route could not
// work. Likewise a peer's /128 is listed only when both ends are
// v6-active (NetBird lists it whenever the remote peer has an address).
// A peer that is not v6-active gets exactly the map it got before the
// overlay existed.

// v6Eligible reports whether p could use the account's overlay, group
// membership aside.
func v6Eligible(acc account.Account, p account.Peer) bool {
	return acc.NetworkV6.IsValid() && p.IPv6.Is6() && !p.IPv6.Is4In6() && acc.NetworkV6.Contains(p.IPv6) && p.SupportsIPv6()
}

// V6Active reports whether p is v6-active (see above) given the account's
// groups: what Login must decide for address_v6 exactly as maps do. Peers
// pending approval belong to no group and temporary peers only to the
// groups naming them, as for policies.
func V6Active(acc account.Account, groups []account.Group, p account.Peer) bool {
	if p.ApprovalRequired || !v6Eligible(acc, p) {
		return false
	}
	for _, g := range groups {
		if !slices.Contains(acc.Settings.IPv6EnabledGroups, g.ID) {
			continue
		}
		if g.All && !p.Temporary || slices.Contains(g.Peers, p.ID) {
			return true
		}
	}
	return false
}

// v6Peers is the set of v6-active peers; members are the resolved groups.
func v6Peers(acc account.Account, byID map[account.PeerID]account.Peer, members map[account.GroupID]map[account.PeerID]bool) map[account.PeerID]bool {
	out := map[account.PeerID]bool{}
	if !acc.NetworkV6.IsValid() {
		return out
	}
	for _, g := range acc.Settings.IPv6EnabledGroups {
		for id := range members[g] {
			if v6Eligible(acc, byID[id]) {
				out[id] = true
			}
		}
	}
	return out
}

// AddressV6 is self's address in the IPv6 overlay with the prefix length
// of the account's NetworkV6 (ok=false: self is not v6-active).
func (m Map) AddressV6() (netip.Prefix, bool) {
	if !m.SelfV6 {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(m.Self.IPv6, m.NetworkV6.Bits()), true
}

// ShowsV6 reports whether m shows p (one of m.Peers) with its v6 address.
func (m Map) ShowsV6(p *account.Peer) bool { return m.V6[p.ID] }

var anyV6 = netip.PrefixFrom(netip.IPv6Unspecified(), 0)

// Suffixes of a 0.0.0.0/0 route's ::/0 mirror (see above).
const (
	mirrorIDSuffix    = "-v6-default"
	mirrorNetIDSuffix = "-v6"
)

// isDefaultV4 reports whether p is 0.0.0.0/0.
func isDefaultV4(p netip.Prefix) bool { return p.IsValid() && p.Addr().Is4() && p.Bits() == 0 }

// isV6 reports whether a route's destination is an IPv6 prefix.
func isV6(p netip.Prefix) bool { return p.IsValid() && p.Addr().Is6() }

// mirror is the ::/0 twin of a 0.0.0.0/0 route.
func mirror(r Route) Route {
	r.ID += mirrorIDSuffix
	r.NetID += mirrorNetIDSuffix
	r.Network = anyV6
	return r
}

// v6Rules are the v6 twins of firewall rules about a remote peer, for a
// v6-active receiver (nil when the remote peer is not v6-active).
func (ix *Index) v6Rules(selfV6 bool, remote account.PeerID, rs []FirewallRule) []FirewallRule {
	if !selfV6 || !ix.v6[remote] {
		return nil
	}
	out := make([]FirewallRule, len(rs))
	for i, r := range rs {
		r.Peer = ix.byID[remote].IPv6
		out[i] = r
	}
	return out
}

// IsV6 reports whether the state's peer id is v6-active (false on a nil
// Index).
func (ix *Index) IsV6(id account.PeerID) bool { return ix != nil && ix.v6[id] }
