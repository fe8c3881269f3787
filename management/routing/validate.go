package routing

import (
	"fmt"
	"net/netip"
	"strings"

	"golang.org/x/net/idna"

	"github.com/wiremesh/wiremesh/management/account"
)

// Limits NetBird's API applies.
const (
	MaxNetIDLen = 40   // a route's network_id, in characters
	MinMetric   = 1    // highest priority
	MaxMetric   = 9999 // lowest priority
	MaxDomains  = 32   // domains of one route
	maxNameLen  = 255
	// MaxDescriptionLen bounds descriptions of routes, networks and
	// resources (NetBird sets none; the body cap alone would allow 1 MiB).
	MaxDescriptionLen = 1024
	// Per-account caps: every route and resource goes into peers' maps.
	MaxRoutes    = 4096
	MaxNetworks  = 1024
	MaxResources = 4096
	MaxRouters   = 4096
)

// Domain checks a route or resource domain and returns it in lower-case
// punycode, without a trailing dot. A leading "*." (a wildcard for every
// name below) is allowed; unicode names are converted.
func Domain(d string) (string, error) {
	d = strings.TrimSuffix(strings.TrimSpace(d), ".")
	wild := strings.HasPrefix(d, "*.")
	name := strings.TrimPrefix(d, "*.")
	if name == "" {
		return "", fmt.Errorf("%q is not a domain name", d)
	}
	ascii, err := idna.Lookup.ToASCII(name)
	if err != nil {
		return "", fmt.Errorf("%q is not a valid domain name: %w", d, err)
	}
	ascii = strings.ToLower(ascii)
	if len(ascii) > 253 {
		return "", fmt.Errorf("%q is longer than 253 characters", d)
	}
	for _, l := range strings.Split(ascii, ".") {
		if l == "" || len(l) > 63 || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			return "", fmt.Errorf("%q is not a valid domain name: bad label %q", d, l)
		}
		for _, c := range l {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return "", fmt.Errorf("%q is not a valid domain name: bad label %q", d, l)
			}
		}
	}
	if wild {
		ascii = "*." + ascii
	}
	return ascii, nil
}

// Prefix parses a CIDR the API received. It must be canonical (no host
// bits set): a route to 10.0.0.1/24 is almost always a typo, and NetBird's
// clients would install 10.0.0.0/24 anyway.
func Prefix(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return p, fmt.Errorf("%q is not a CIDR prefix (like 10.0.0.0/24)", s)
	}
	if p != p.Masked() {
		return p, fmt.Errorf("%s has host bits set; did you mean %s?", p, p.Masked())
	}
	return p, nil
}

// ParseAddress reads a network resource's address: a host IP (with or
// without /32 or /128), a subnet or a domain, and derives its type as
// NetBird does.
func ParseAddress(addr string) (typ string, prefix netip.Prefix, domain string, err error) {
	a := strings.TrimSpace(addr)
	if a == "" {
		return "", prefix, "", fmt.Errorf("address is empty; give a host IP, a subnet or a domain")
	}
	if ip, err := netip.ParseAddr(a); err == nil {
		if ip.Zone() != "" {
			return "", prefix, "", fmt.Errorf("%q: an address with a zone cannot be routed", addr)
		}
		return account.ResourceHost, netip.PrefixFrom(ip, ip.BitLen()), "", nil
	}
	if strings.Contains(a, "/") {
		p, err := Prefix(a)
		if err != nil {
			return "", p, "", err
		}
		if p.Bits() == p.Addr().BitLen() {
			return account.ResourceHost, p, "", nil
		}
		return account.ResourceSubnet, p, "", nil
	}
	d, err := Domain(a)
	if err != nil {
		return "", prefix, "", fmt.Errorf("%q is not a host IP, subnet or domain: %w", addr, err)
	}
	return account.ResourceDomain, prefix, d, nil
}

// overlay refuses a prefix inside or around the account's overlay
// network: routing it would take peer-to-peer traffic away from WireGuard
// (or, for a covering prefix, cut peers off each other). Default routes
// are exit nodes; clients keep the overlay's own route, more specific.
func overlay(field string, p netip.Prefix, acct account.Account) error {
	if p.Bits() == 0 || !acct.Network.IsValid() || !p.Overlaps(acct.Network) {
		return nil
	}
	return invalid("%s: %s overlaps the account's peer network %s", field, p, acct.Network)
}

// metric checks a routing metric.
func metric(m int) error {
	if m < MinMetric || m > MaxMetric {
		return invalid("metric: %d is outside %d-%d", m, MinMetric, MaxMetric)
	}
	return nil
}

// cleanName trims a network or resource name and checks its length.
func cleanName(field, name string) (string, error) {
	name = strings.TrimSpace(name)
	if name == "" || len(name) > maxNameLen {
		return "", invalid("%s: must have 1 to %d characters", field, maxNameLen)
	}
	return name, nil
}

// description checks a description's length.
func description(d string) error {
	if len(d) > MaxDescriptionLen {
		return invalid("description: longer than %d bytes", MaxDescriptionLen)
	}
	return nil
}

// full refuses a creation that would take the account past a cap.
func full(kind string, have, limit int) error {
	if have >= limit {
		return invalid("the account already has %d %s, the most it may have", have, kind)
	}
	return nil
}
