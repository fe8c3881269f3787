package ipam

import (
	"encoding/binary"
	"fmt"
	"net/netip"
)

// Readdress maps addresses of the network from into the network to, for
// moving every peer at once: an address keeps its host part (its offset in
// the network) when that is a host address of to, so a move between ranges
// of the same size changes only the network part; the others get the
// lowest free host addresses of to. Results are distinct and in the order
// of ips. ErrFull: to has fewer host addresses than ips.
func Readdress(from, to netip.Prefix, ips []netip.Addr) ([]netip.Addr, error) {
	from, to = from.Masked(), to.Masked()
	if !to.Addr().Is4() || to.Bits() > 30 {
		return nil, fmt.Errorf("unsupported overlay network %s", to)
	}
	size := uint64(1) << (32 - to.Bits())
	if uint64(len(ips)) > size-2 {
		return nil, fmt.Errorf("%w: %s has %d host addresses for %d peers", ErrFull, to, size-2, len(ips))
	}
	fb, tb := u32(from.Addr()), u32(to.Addr())
	out := make([]netip.Addr, len(ips))
	used := make(map[netip.Addr]bool, len(ips))
	var rest []int
	for i, ip := range ips {
		if ip.Is4() && from.Contains(ip) {
			off := uint64(u32(ip) - fb)
			cand := addr(tb + uint32(off))
			if off > 0 && off < size-1 && !used[cand] {
				out[i], used[cand] = cand, true
				continue
			}
		}
		rest = append(rest, i)
	}
	// One pass over to's host addresses for all the others.
	off := uint64(1)
	for _, i := range rest {
		for off < size-1 && used[addr(tb+uint32(off))] {
			off++
		}
		if off >= size-1 {
			return nil, fmt.Errorf("%w: %s", ErrFull, to)
		}
		out[i] = addr(tb + uint32(off))
		used[out[i]] = true
	}
	return out, nil
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func addr(v uint32) netip.Addr {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], v)
	return netip.AddrFrom4(b)
}
