package ipam

import (
	"crypto/rand"
	"fmt"
	"net/netip"
)

// NetworkV6Bits is the prefix length of an account's random IPv6 overlay.
const NetworkV6Bits = 64

// RandomNetworkV6 picks a random RFC 4193 unique local /64: fd, a random
// 40-bit global ID and a random 16-bit subnet ID, as the reference does,
// so that two installations (or accounts) practically never overlap.
func RandomNetworkV6() (netip.Prefix, error) {
	var b [16]byte
	if _, err := rand.Read(b[1:8]); err != nil {
		return netip.Prefix{}, fmt.Errorf("random IPv6 network: %w", err)
	}
	b[0] = 0xfd
	return netip.PrefixFrom(netip.AddrFrom16(b), NetworkV6Bits), nil
}

// PickV6 returns a random host address of the IPv6 network, never the
// subnet-router anycast address (host part all zeros) nor the all-ones
// host, asking taken about each candidate. A /64 holds 2^64 hosts, so
// random picks collide only when a small custom range is nearly full:
// then ErrCrowded, and the caller scans with NextV6.
func PickV6(network netip.Prefix, taken func(netip.Addr) (bool, error)) (netip.Addr, error) {
	network = network.Masked()
	if err := checkV6(network); err != nil {
		return netip.Addr{}, err
	}
	for range randomTries {
		var r [16]byte
		if _, err := rand.Read(r[:]); err != nil {
			return netip.Addr{}, fmt.Errorf("random IPv6 address: %w", err)
		}
		ip := withHost(network, r)
		if !usableV6(network, ip) {
			continue
		}
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

// NextV6 returns the lowest usable host address of the IPv6 network not
// in used (the slow path of PickV6 in a small, crowded custom range).
func NextV6(network netip.Prefix, used map[netip.Addr]bool) (netip.Addr, error) {
	network = network.Masked()
	if err := checkV6(network); err != nil {
		return netip.Addr{}, err
	}
	for ip := network.Addr().Next(); ip.IsValid() && network.Contains(ip); ip = ip.Next() {
		if usableV6(network, ip) && !used[ip] {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("%w: %s", ErrFull, network)
}

// ReaddressV6 maps IPv6 addresses into the network to, for moving every
// IPv6 peer when the account's range changes: an address keeps its host
// bits (those below to's prefix length) when they make a usable, unused
// address of to, so a move between /64s keeps every interface ID; the
// others get random free addresses. Results are distinct and in the order
// of ips.
func ReaddressV6(to netip.Prefix, ips []netip.Addr) ([]netip.Addr, error) {
	to = to.Masked()
	if err := checkV6(to); err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(ips))
	used := make(map[netip.Addr]bool, len(ips))
	var rest []int
	for i, ip := range ips {
		if ip.Is6() && !ip.Is4In6() {
			cand := withHost(to, ip.As16())
			if usableV6(to, cand) && !used[cand] {
				out[i], used[cand] = cand, true
				continue
			}
		}
		rest = append(rest, i)
	}
	taken := func(ip netip.Addr) (bool, error) { return used[ip], nil }
	for _, i := range rest {
		ip, err := PickV6(to, taken)
		if err != nil {
			if ip, err = NextV6(to, used); err != nil {
				return nil, err
			}
		}
		out[i], used[ip] = ip, true
	}
	return out, nil
}

// checkV6 accepts the IPv6 networks PickV6 can serve: at least 2 host bits.
func checkV6(network netip.Prefix) error {
	if !network.Addr().Is6() || network.Addr().Is4In6() || network.Bits() > 126 || network.Bits() < 1 {
		return fmt.Errorf("unsupported IPv6 overlay network %s", network)
	}
	return nil
}

// withHost combines network's prefix bits with host's remaining bits.
func withHost(network netip.Prefix, host [16]byte) netip.Addr {
	n := network.Addr().As16()
	bits := network.Bits()
	for i := range 16 {
		var mask byte // the network's bits of byte i
		switch {
		case bits >= (i+1)*8:
			mask = 0xff
		case bits > i*8:
			mask = ^byte(0xff >> (bits - i*8))
		}
		n[i] = n[i]&mask | host[i]&^mask
	}
	return netip.AddrFrom16(n)
}

// UsableV6 reports whether ip is a host address PickV6 could give:
// inside network, its host part neither all zeros (the subnet-router
// anycast address, RFC 4291 2.6.1) nor all ones.
func UsableV6(network netip.Prefix, ip netip.Addr) bool { return usableV6(network.Masked(), ip) }

func usableV6(network netip.Prefix, ip netip.Addr) bool {
	if !network.Contains(ip) {
		return false
	}
	zeros := withHost(network, [16]byte{})
	var ones [16]byte
	for i := range ones {
		ones[i] = 0xff
	}
	return ip != zeros && ip != withHost(network, ones)
}
