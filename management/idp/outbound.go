package idp

import (
	"fmt"
	"net/http"
	"net/netip"
	"time"

	"github.com/wiremesh/wiremesh/internal/addrpolicy"
)

// UpstreamAllow are the operator's exceptions to the address policy of
// the client that talks to upstream identity providers (discovery, token
// and key endpoints, whose URLs an account admin supplies).
type UpstreamAllow struct {
	// Hosts are trusted by name (or literal address), whatever they
	// resolve to.
	Hosts []string
	// CIDRs are ranges that may be connected to.
	CIDRs []netip.Prefix
}

// upstreamTimeout bounds one exchange with an upstream provider.
const upstreamTimeout = 15 * time.Second

// UpstreamClient is the client for upstream providers: it refuses to
// connect to loopback, link-local (cloud metadata), private (RFC 1918),
// CGNAT, multicast and reserved ranges and this host's own addresses,
// checking the address actually dialled (so DNS rebinding does not get
// around it) on every connection, redirects included; allow opens
// exceptions.
func UpstreamClient(allow UpstreamAllow) (*http.Client, error) {
	own, err := addrpolicy.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("upstream identity provider client: %w", err)
	}
	return addrpolicy.New(own, addrpolicy.Private, allow.CIDRs).HTTPClient(upstreamTimeout, allow.Hosts), nil
}
