package turnserver

import (
	"net/netip"

	"github.com/wiremesh/wiremesh/internal/addrpolicy"
)

// PeerPolicy decides which peer addresses clients may relay to
// (package addrpolicy's rules, shared with management's upstream
// identity-provider client).
type PeerPolicy = addrpolicy.Policy

// NewPeerPolicy denies addrpolicy's default ranges, the server's own
// addresses and denied; allowed overrides all of them. The private LAN
// ranges are not denied by default: peers may legitimately be there.
func NewPeerPolicy(own []netip.Addr, denied, allowed []netip.Prefix) *PeerPolicy {
	return addrpolicy.New(own, denied, allowed)
}

// InterfaceAddrs are the addresses of every interface of this host, and the
// broadcast address of each IPv4 subnet on them.
func InterfaceAddrs() ([]netip.Addr, error) { return addrpolicy.InterfaceAddrs() }
