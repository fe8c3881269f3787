package addrpolicy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"time"
)

// ErrDenied is a connection refused by the policy.
var ErrDenied = errors.New("address denied by the outbound policy")

// maxRedirects bounds the redirects the client follows.
const maxRedirects = 5

// Control is a net.Dialer Control function refusing addresses p denies.
// It runs on the address actually dialled, after name resolution, so a
// name that resolves (or re-resolves: DNS rebinding) to a denied address
// is refused.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: %q is not an address", ErrDenied, address)
	}
	if !p.Allowed(ap.Addr()) {
		return fmt.Errorf("%w: %s", ErrDenied, ap.Addr())
	}
	return nil
}

// HTTPClient is a client that connects only where p allows, except to the
// hosts named in allowHosts (host names or literal addresses, matched
// case-insensitively, without port), which the operator trusts whatever
// they resolve to. Every connection is checked, those of redirects
// included (at most 5, http and https only); environment proxies are not
// used, since a proxy would connect on the client's behalf unchecked.
func (p *Policy) HTTPClient(timeout time.Duration, allowHosts []string) *http.Client {
	hosts := make([]string, 0, len(allowHosts))
	for _, h := range allowHosts {
		hosts = append(hosts, strings.ToLower(strings.Trim(strings.TrimSpace(h), "[]")))
	}
	checked := &net.Dialer{Timeout: 10 * time.Second, Control: p.Control}
	trusted := &net.Dialer{Timeout: 10 * time.Second}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err != nil {
			return nil, err
		}
		if slices.Contains(hosts, strings.ToLower(host)) {
			return trusted.DialContext(ctx, network, addr)
		}
		return checked.DialContext(ctx, network, addr)
	}
	tr := &http.Transport{
		Proxy:                 nil,
		DialContext:           dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Transport: tr, Timeout: timeout, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= maxRedirects {
			return fmt.Errorf("stopped after %d redirects", maxRedirects)
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("%w: redirect to scheme %q", ErrDenied, req.URL.Scheme)
		}
		return nil
	}}
}
