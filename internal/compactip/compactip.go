// Package compactip encodes and decodes NetBird's compact prefixes
// (PeerConfig.address_v6, FirewallRule.sourcePrefixes): the address bytes,
// 4 for IPv4 or 16 for IPv6, then one byte of prefix length. It does not
// decide which prefixes a map carries.
package compactip

import (
	"errors"
	"fmt"
	"net/netip"
)

// ErrMalformed is a compact prefix of the wrong size or prefix length.
var ErrMalformed = errors.New("compact prefix: want 4 or 16 address bytes and a prefix length byte")

// Prefix encodes p, host bits kept (address_v6 is the peer's own address
// with its network's length). An IPv4-mapped IPv6 address is encoded as
// IPv4, as NetBird does; an invalid prefix gives nil.
func Prefix(p netip.Prefix) []byte {
	if !p.IsValid() {
		return nil
	}
	a, bits := p.Addr(), p.Bits()
	if a.Is4In6() {
		if bits < 96 {
			return nil
		}
		a, bits = a.Unmap(), bits-96
	}
	return append(a.AsSlice(), byte(bits))
}

// Addr encodes a as a host prefix (/32 or /128).
func Addr(a netip.Addr) []byte { return Prefix(netip.PrefixFrom(a, a.BitLen())) }

// Parse decodes a compact prefix, host bits kept.
func Parse(b []byte) (netip.Prefix, error) {
	var a netip.Addr
	switch len(b) {
	case 5:
		a = netip.AddrFrom4([4]byte(b[:4]))
	case 17:
		a = netip.AddrFrom16([16]byte(b[:16]))
	default:
		return netip.Prefix{}, fmt.Errorf("%w: got %d bytes", ErrMalformed, len(b))
	}
	bits := int(b[len(b)-1])
	if bits > a.BitLen() {
		return netip.Prefix{}, fmt.Errorf("%w: length %d for a %d-bit address", ErrMalformed, bits, a.BitLen())
	}
	return netip.PrefixFrom(a, bits), nil
}
