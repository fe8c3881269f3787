// Package clientip finds the address a request came from: the direct
// peer, or, when that peer is a trusted reverse proxy, the rightmost
// address in X-Forwarded-For that is not itself a trusted proxy. A header
// from any other peer is ignored, so a client cannot choose the address
// it is rate-limited by.
//
// It does not decide what the address is used for.
package clientip

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
)

// Header is the forwarding header read from trusted proxies.
const Header = "X-Forwarded-For"

// maxHops bounds how many forwarded addresses are looked at.
const maxHops = 32

// Resolver finds client addresses. The zero Resolver trusts no proxy.
type Resolver struct {
	// Trusted are the reverse proxies whose forwarding header is believed.
	Trusted []netip.Prefix
}

func (r Resolver) trusted(a netip.Addr) bool {
	for _, p := range r.Trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Resolve returns the client's address given the direct peer's address
// and the values of its forwarding header (in order; each may hold a
// comma-separated list). An unparsable hop ends the walk: the last
// trusted hop before it is the answer.
func (r Resolver) Resolve(peer netip.Addr, forwarded []string) netip.Addr {
	peer = peer.Unmap()
	if !peer.IsValid() || !r.trusted(peer) || len(forwarded) == 0 {
		return peer
	}
	var hops []string
	for _, v := range forwarded {
		hops = append(hops, strings.Split(v, ",")...)
	}
	if len(hops) > maxHops {
		hops = hops[len(hops)-maxHops:]
	}
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return client
		}
		client = a.Unmap()
		if !r.trusted(client) {
			return client
		}
	}
	return client
}

// FromRequest is the client address of an HTTP request (the zero Addr if
// RemoteAddr is not an address).
func (r Resolver) FromRequest(req *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(req.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return r.Resolve(ap.Addr(), req.Header.Values(Header))
}

// ParsePrefixes parses proxy addresses or prefixes ("10.0.0.1",
// "10.0.0.0/8", "fd00::/8"); a bare address is a single-address prefix.
func ParsePrefixes(ss []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range ss {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want an address or a prefix: %w", s, err)
		}
		a = a.Unmap()
		out = append(out, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, nil
}
