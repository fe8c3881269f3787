package ipam

import (
	"errors"
	"net/netip"
	"testing"
)

func TestRandomNetworkV6(t *testing.T) {
	ula := netip.MustParsePrefix("fd00::/8")
	seen := map[netip.Prefix]bool{}
	for range 100 {
		p, err := RandomNetworkV6()
		if err != nil {
			t.Fatal(err)
		}
		if p.Bits() != 64 || !ula.Contains(p.Addr()) || p.Masked() != p {
			t.Fatalf("RandomNetworkV6 = %s, want a masked /64 in fd00::/8", p)
		}
		seen[p] = true
	}
	if len(seen) < 100 {
		t.Errorf("100 random networks gave %d distinct ones", len(seen))
	}
}

func TestPickV6(t *testing.T) {
	n := netip.MustParsePrefix("fd12:3456:789a:1::/64")
	taken := map[netip.Addr]bool{}
	for range 200 {
		ip, err := PickV6(n, func(a netip.Addr) (bool, error) { return taken[a], nil })
		if err != nil {
			t.Fatal(err)
		}
		if !n.Contains(ip) || ip == n.Addr() || taken[ip] {
			t.Fatalf("PickV6 = %s: outside %s, the anycast address or taken", ip, n)
		}
		taken[ip] = true
	}
	// A /126 has two usable hosts (::1 and ::2); with both taken random
	// tries give up and the scan finds none.
	small := netip.MustParsePrefix("fd00::/126")
	used := map[netip.Addr]bool{netip.MustParseAddr("fd00::1"): true, netip.MustParseAddr("fd00::2"): true}
	if _, err := PickV6(small, func(a netip.Addr) (bool, error) { return used[a], nil }); !errors.Is(err, ErrCrowded) {
		t.Errorf("PickV6 in a full /126: err = %v, want ErrCrowded", err)
	}
	if _, err := NextV6(small, used); !errors.Is(err, ErrFull) {
		t.Errorf("NextV6 in a full /126: err = %v, want ErrFull", err)
	}
	delete(used, netip.MustParseAddr("fd00::2"))
	if ip, err := NextV6(small, used); err != nil || ip != netip.MustParseAddr("fd00::2") {
		t.Errorf("NextV6 = %s, %v; want fd00::2", ip, err)
	}
	boom := errors.New("boom")
	if _, err := PickV6(n, func(netip.Addr) (bool, error) { return false, boom }); !errors.Is(err, boom) {
		t.Errorf("PickV6 with a failing lookup: err = %v", err)
	}
	for _, bad := range []string{"100.64.0.0/16", "fd00::/127", "::ffff:10.0.0.0/120"} {
		if _, err := PickV6(netip.MustParsePrefix(bad), func(netip.Addr) (bool, error) { return false, nil }); err == nil {
			t.Errorf("PickV6(%s) succeeded", bad)
		}
	}
}

func TestReaddressV6(t *testing.T) {
	to := netip.MustParsePrefix("fd99:1:2:3::/64")
	ips := []netip.Addr{
		netip.MustParseAddr("fd00:aaaa:bbbb:cccc:1:2:3:4"),
		netip.MustParseAddr("fd11::1:2:3:4"), // same interface ID: collides
		netip.MustParseAddr("fd00:aaaa:bbbb:cccc::"),
		netip.MustParseAddr("fd00:aaaa:bbbb:cccc::9"),
	}
	got, err := ReaddressV6(to, ips)
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParseAddr("fd99:1:2:3:1:2:3:4"); got[0] != want {
		t.Errorf("first peer: %s, want %s (interface ID kept)", got[0], want)
	}
	if want := netip.MustParseAddr("fd99:1:2:3::9"); got[3] != want {
		t.Errorf("last peer: %s, want %s", got[3], want)
	}
	seen := map[netip.Addr]bool{}
	for i, ip := range got {
		if !to.Contains(ip) || ip == to.Addr() || seen[ip] {
			t.Errorf("address %d: %s is outside %s, the anycast address or a duplicate", i, ip, to)
		}
		seen[ip] = true
	}
	// A range too small for every peer fails.
	if _, err := ReaddressV6(netip.MustParsePrefix("fd00::/126"), ips); !errors.Is(err, ErrFull) {
		t.Errorf("ReaddressV6 into a /126: err = %v, want ErrFull", err)
	}
}

func FuzzWithHost(f *testing.F) {
	f.Add([]byte{0xfd, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}, uint8(64))
	f.Add(make([]byte, 16), uint8(125))
	f.Fuzz(func(t *testing.T, b []byte, bits uint8) {
		if len(b) != 16 || bits < 1 || bits > 126 {
			return
		}
		n := netip.PrefixFrom(netip.AddrFrom16([16]byte(b)), int(bits)).Masked()
		if n.Addr().Is4In6() {
			return
		}
		ip, err := PickV6(n, func(netip.Addr) (bool, error) { return false, nil })
		if err != nil && !errors.Is(err, ErrCrowded) {
			t.Fatal(err)
		}
		if err == nil && (!usableV6(n, ip)) {
			t.Fatalf("PickV6(%s) = %s, not usable", n, ip)
		}
	})
}
