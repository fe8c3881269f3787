package mgmtclient

import (
	"fmt"
	"net/netip"

	"github.com/wiremesh/wiremesh/internal/compactip"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Addresses are this peer's overlay addresses as management assigns them
// in PeerConfig: V4 always, V6 (the IPv6 overlay) only for a peer in one
// of the account's IPv6 groups that announced the IPv6Overlay capability.
type Addresses struct {
	V4 netip.Prefix
	V6 netip.Prefix // the zero Prefix: no IPv6 overlay address
}

// PeerAddresses converts a PeerConfig's addresses, the one place where the
// wire forms (a CIDR string, a compact 17-byte IPv6 prefix) are read. A
// missing address_v6 is no error; a malformed one is, and names the field.
func PeerAddresses(pc *mgmtpb.PeerConfig) (Addresses, error) {
	var a Addresses
	v4, err := netip.ParsePrefix(pc.GetAddress())
	if err != nil || !v4.Addr().Is4() {
		return a, fmt.Errorf("management sent a bad peerConfig.address %q: want an IPv4 CIDR", pc.GetAddress())
	}
	a.V4 = v4
	if raw := pc.GetAddressV6(); len(raw) > 0 {
		v6, err := compactip.Parse(raw)
		if err != nil {
			return a, fmt.Errorf("management sent a bad peerConfig.address_v6: %w", err)
		}
		if why := badOverlay6(v6); why != "" {
			return a, fmt.Errorf("management sent a bad peerConfig.address_v6 %s: %s", v6, why)
		}
		a.V6 = v6
	}
	return a, nil
}

// The IPv6 overlay's prefix length bounds, those management accepts for
// network_range_v6: the prefix becomes a route through the tunnel, so a
// short one (2000::/3) would take the host's IPv6 internet into it, and
// one past /120 leaves no room for peers.
const (
	minOverlay6Bits = 48
	maxOverlay6Bits = 120
)

// badOverlay6 says why p cannot be this peer's IPv6 overlay address ("":
// it can): it must be an IPv6 unicast address that is neither link-local
// (every interface has its own fe80::/64), loopback nor unspecified, with
// a prefix length within the bounds.
func badOverlay6(p netip.Prefix) string {
	a := p.Addr()
	switch {
	case !a.Is6() || a.Is4In6():
		return "want an IPv6 address, not an IPv4 or IPv4-mapped one"
	case a.IsUnspecified(), a.IsLoopback(), a.IsMulticast(), a.IsLinkLocalUnicast(), a.IsInterfaceLocalMulticast():
		return "want a unicast address (not unspecified, loopback, multicast or link-local)"
	case p.Bits() < minOverlay6Bits || p.Bits() > maxOverlay6Bits:
		return fmt.Sprintf("the overlay prefix length must be /%d to /%d", minOverlay6Bits, maxOverlay6Bits)
	}
	return ""
}
