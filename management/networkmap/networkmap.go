// Package networkmap computes what one peer must know about its account: its
// own config and the peers it may reach, with the rules that let traffic
// flow. It is a pure function of account state; it does not load state or
// encode protobuf (package grpcapi does that at the boundary).
package networkmap

import (
	"net/netip"
	"sort"

	"github.com/wiremesh/wiremesh/management/account"
)

// Map is one peer's view of its network.
type Map struct {
	Serial  uint64
	Domain  string
	Network netip.Prefix
	Self    account.Peer
	Peers   []account.Peer // remote peers, ordered by IP
	// AllowAll means every peer may reach every other. Until access
	// policies exist it is always true.
	AllowAll bool
}

// Address is the peer's overlay address with the account's prefix length,
// printed exactly as the client compares it (netip.Prefix.String()).
func (m Map) Address() string {
	return netip.PrefixFrom(m.Self.IP, m.Network.Bits()).String()
}

// Compute returns the map of self given the account and all its peers. It
// returns ok=false if self is not among peers.
func Compute(acc account.Account, peers []account.Peer, self account.PeerID) (Map, bool) {
	m := Map{Serial: acc.Serial, Domain: acc.Domain, Network: acc.Network, AllowAll: true}
	found := false
	for _, p := range peers {
		if p.ID == self {
			m.Self, found = p, true
			continue
		}
		m.Peers = append(m.Peers, p)
	}
	if !found {
		return Map{}, false
	}
	sort.Slice(m.Peers, func(i, j int) bool { return m.Peers[i].IP.Less(m.Peers[j].IP) })
	return m, true
}
