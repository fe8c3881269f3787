// Package ipam allocates overlay addresses. Each account gets a /16 inside
// the CGNAT range 100.64.0.0/10; peers get free host addresses in it. It is
// pure: callers pass in what is used and persist the result (the store's
// unique index is the final guard against races).
package ipam

import (
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Space is the range every account network is carved from.
var Space = netip.MustParsePrefix("100.64.0.0/10")

// AccountBits is the prefix length of an account network.
const AccountBits = 16

// ErrFull is returned when a network has no free host address.
var ErrFull = errors.New("overlay network is full")

// RandomNetwork picks a random /16 inside Space, as the reference does, so
// that two self-hosted installations rarely overlap.
func RandomNetwork() (netip.Prefix, error) {
	var b [2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return netip.Prefix{}, fmt.Errorf("random network: %w", err)
	}
	n := binary.BigEndian.Uint16(b[:]) % (1 << (AccountBits - Space.Bits()))
	base := Space.Addr().As4()
	v := binary.BigEndian.Uint32(base[:]) | uint32(n)<<(32-AccountBits)
	var out [4]byte
	binary.BigEndian.PutUint32(out[:], v)
	return netip.PrefixFrom(netip.AddrFrom4(out), AccountBits), nil
}

// Next returns the lowest host address of network not in used, skipping the
// network and broadcast addresses.
func Next(network netip.Prefix, used map[netip.Addr]bool) (netip.Addr, error) {
	network = network.Masked()
	if !network.Addr().Is4() || network.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("unsupported overlay network %s", network)
	}
	a := network.Addr().As4()
	base := binary.BigEndian.Uint32(a[:])
	size := uint32(1) << (32 - network.Bits())
	for off := uint32(1); off < size-1; off++ {
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], base+off)
		ip := netip.AddrFrom4(b)
		if !used[ip] {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: %s", ErrFull, network)
}
