// Package ipam allocates overlay addresses. Each account gets a /16 inside
// the CGNAT range 100.64.0.0/10; peers get free host addresses in it. For
// the IPv6 overlay each account gets a random ULA /64 and its IPv6 peers
// random host addresses in it (v6.go). It is pure: callers pass in what is used and persist the result (the store's
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

// randomTries is how many random addresses Pick tries before it gives up
// and the caller scans for the lowest free one. Even in a /16 that is 90%
// full, 64 tries all hit used addresses with probability 0.9^64 (0.1%).
const randomTries = 64

// ErrCrowded is returned by Pick when random tries found nothing free; the
// caller then falls back to Next over the full set of used addresses.
var ErrCrowded = errors.New("no free address found by random tries")

// Pick returns a random free host address of network, asking taken about
// each candidate. It costs a few indexed lookups instead of reading every
// peer of the account, so registrations stay cheap in large accounts.
func Pick(network netip.Prefix, taken func(netip.Addr) (bool, error)) (netip.Addr, error) {
	network = network.Masked()
	if !network.Addr().Is4() || network.Bits() > 30 {
		return netip.Addr{}, fmt.Errorf("unsupported overlay network %s", network)
	}
	a := network.Addr().As4()
	base := binary.BigEndian.Uint32(a[:])
	hosts := uint32(1)<<(32-network.Bits()) - 2
	for range randomTries {
		var r [4]byte
		if _, err := rand.Read(r[:]); err != nil {
			return netip.Addr{}, fmt.Errorf("random address: %w", err)
		}
		var b [4]byte
		binary.BigEndian.PutUint32(b[:], base+1+binary.BigEndian.Uint32(r[:])%hosts)
		ip := netip.AddrFrom4(b)
		used, err := taken(ip)
		if err != nil {
			return netip.Addr{}, err
		}
		if !used {
			return ip, nil
		}
	}
	return netip.Addr{}, ErrCrowded
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
