package account

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"time"
)

// Extra are the account's approval and traffic-log switches (the API's
// settings.extra). The approvals are honoured by the users and peers
// packages; traffic logs are not implemented and stay off.
type Extra struct {
	// PeerApprovalEnabled keeps new peers pending until an admin approves.
	PeerApprovalEnabled bool `json:"peer_approval_enabled,omitempty"`
	// UserApprovalRequired keeps users who join by domain pending.
	UserApprovalRequired bool `json:"user_approval_required,omitempty"`
}

// UnmarshalJSON reads stored settings; groups_propagation_enabled, absent
// from settings stored before it existed, is then true (as before it
// existed, and as for new accounts).
func (s *Settings) UnmarshalJSON(b []byte) error {
	type plain Settings
	p := plain{GroupsPropagationEnabled: true}
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*s = Settings(p)
	return nil
}

// MaxJWTAllowGroups bounds the allow list (and each name's length).
const (
	MaxJWTAllowGroups = 100
	maxGroupName      = 256
)

// validateMore checks the settings Validate does not: the inactivity
// expiration, the JWT claim name and the allow list.
func (s Settings) validateMore() error {
	if s.PeerInactivityExpiration < 0 || s.PeerInactivityExpiration > MaxLoginExpiration ||
		(s.PeerInactivityExpirationEnabled && s.PeerInactivityExpiration < 60) {
		return fmt.Errorf("%w: peer_inactivity_expiration must be 60 to %d seconds", ErrBadSettings, MaxLoginExpiration)
	}
	if len(s.JWTGroupsClaimName) > 256 || strings.ContainsAny(s.JWTGroupsClaimName, "\x00\n\r") {
		return fmt.Errorf("%w: jwt_groups_claim_name is not a valid claim name", ErrBadSettings)
	}
	if len(s.JWTAllowGroups) > MaxJWTAllowGroups {
		return fmt.Errorf("%w: jwt_allow_groups holds at most %d names", ErrBadSettings, MaxJWTAllowGroups)
	}
	for _, g := range s.JWTAllowGroups {
		if strings.TrimSpace(g) == "" || len(g) > maxGroupName {
			return fmt.Errorf("%w: jwt_allow_groups has an empty or too long group name", ErrBadSettings)
		}
	}
	return nil
}

// JWTAllows reports whether a user holding groups (the names of the JWT
// groups claim) may use the account: always, unless JWT groups are on and
// an allow list is set, which must then name one of them.
func (s Settings) JWTAllows(groups []string) bool {
	if !s.JWTGroupsEnabled || len(s.JWTAllowGroups) == 0 {
		return true
	}
	for _, g := range groups {
		for _, a := range s.JWTAllowGroups {
			if g == a {
				return true
			}
		}
	}
	return false
}

// InactivityExpiry is when a peer added by a user, disconnected, must log
// in again because it stayed away too long (zero: never, or connected).
// Its absence counts from the later of its last contact and last login.
func (s Settings) InactivityExpiry(p Peer) time.Time {
	if !s.PeerInactivityExpirationEnabled || s.PeerInactivityExpiration <= 0 || p.Connected || !p.LoginExpirationEnabled || p.UserID == "" {
		return time.Time{}
	}
	since := p.LastSeen
	if p.LastLogin.After(since) {
		since = p.LastLogin
	}
	return since.Add(time.Duration(min(s.PeerInactivityExpiration, MaxLoginExpiration)) * time.Second)
}

// Expired reports whether a peer added by a user must log in again at now,
// because its login expired or it was inactive too long.
func (s Settings) Expired(p Peer, now time.Time) bool {
	if exp := s.LoginExpiry(p); !exp.IsZero() && now.After(exp) {
		return true
	}
	exp := s.InactivityExpiry(p)
	return !exp.IsZero() && now.After(exp)
}

// Network range limits: a custom overlay range is private IPv4, at least
// a /8 and at most a /28 (NetBird's smallest).
const (
	MinNetworkBits = 8
	MaxNetworkBits = 28
)

var privateRanges = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("172.16.0.0/12"),
	netip.MustParsePrefix("192.168.0.0/16"),
	netip.MustParsePrefix("100.64.0.0/10"),
}

// ParseNetworkRange checks a custom overlay range: an IPv4 CIDR inside a
// private or the shared (CGNAT) address space, /8 to /28. It returns the
// masked prefix.
func ParseNetworkRange(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: network_range %q is not a CIDR", ErrBadSettings, s)
	}
	p = p.Masked()
	if !p.Addr().Is4() {
		return netip.Prefix{}, fmt.Errorf("%w: network_range must be IPv4", ErrBadSettings)
	}
	if p.Bits() < MinNetworkBits || p.Bits() > MaxNetworkBits {
		return netip.Prefix{}, fmt.Errorf("%w: network_range must be a /%d to /%d", ErrBadSettings, MinNetworkBits, MaxNetworkBits)
	}
	for _, r := range privateRanges {
		if r.Bits() <= p.Bits() && r.Contains(p.Addr()) {
			return p, nil
		}
	}
	return netip.Prefix{}, fmt.Errorf("%w: network_range must lie in 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16 or 100.64.0.0/10", ErrBadSettings)
}

// IPv6 overlay range limits, as NetBird's: /48 (largest) to /120.
const (
	MinNetworkV6Bits = 48
	MaxNetworkV6Bits = 120
)

// ParseNetworkRangeV6 checks a custom IPv6 overlay range: an IPv6 CIDR,
// /48 to /120, of unicast addresses (not loopback, link-local, multicast,
// unspecified or IPv4-mapped; a ULA in fd00::/8 is the usual choice). It
// returns the masked prefix.
func ParseNetworkRangeV6(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%w: network_range_v6 %q is not a CIDR", ErrBadSettings, s)
	}
	p = p.Masked()
	a := p.Addr()
	if !a.Is6() || a.Is4In6() {
		return netip.Prefix{}, fmt.Errorf("%w: network_range_v6 must be IPv6", ErrBadSettings)
	}
	if p.Bits() < MinNetworkV6Bits || p.Bits() > MaxNetworkV6Bits {
		return netip.Prefix{}, fmt.Errorf("%w: network_range_v6 must be a /%d to /%d", ErrBadSettings, MinNetworkV6Bits, MaxNetworkV6Bits)
	}
	if a.IsUnspecified() || a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() || !a.IsGlobalUnicast() && !a.IsPrivate() {
		return netip.Prefix{}, fmt.Errorf("%w: network_range_v6 must be a unicast range (not loopback, link-local or multicast), e.g. a ULA in fd00::/8", ErrBadSettings)
	}
	return p, nil
}

// Hosts is how many peer addresses a network holds (without the network
// and broadcast addresses).
func Hosts(p netip.Prefix) int {
	return 1<<(32-p.Bits()) - 2
}

// ParseDNSDomain checks a custom peer DNS domain: at least two labels of
// letters, digits and hyphens (not at a label's ends), 1 to 63 characters
// each, 253 in all. It returns the domain lower-cased, without a final dot.
func ParseDNSDomain(s string) (string, error) {
	d := strings.ToLower(strings.TrimSuffix(strings.TrimSpace(s), "."))
	bad := fmt.Errorf("%w: dns_domain %q is not a valid domain name", ErrBadSettings, s)
	if d == "" || len(d) > 253 {
		return "", bad
	}
	labels := strings.Split(d, ".")
	if len(labels) < 2 {
		return "", fmt.Errorf("%w: dns_domain %q needs at least two labels (e.g. mesh.internal)", ErrBadSettings, s)
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return "", bad
		}
		for _, c := range l {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
				return "", bad
			}
		}
	}
	return d, nil
}
