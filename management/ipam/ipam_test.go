package ipam

import (
	"errors"
	"net/netip"
	"testing"
)

func TestRandomNetworkInsideSpace(t *testing.T) {
	seen := map[netip.Prefix]bool{}
	for i := 0; i < 500; i++ {
		p, err := RandomNetwork()
		if err != nil {
			t.Fatal(err)
		}
		if p.Bits() != 16 || !Space.Contains(p.Addr()) || p.Masked() != p {
			t.Fatalf("bad network %s", p)
		}
		seen[p] = true
	}
	if len(seen) < 40 { // a /10 holds 64 /16s
		t.Fatalf("only %d of 64 networks in 500 draws", len(seen))
	}
}

func TestNext(t *testing.T) {
	n := netip.MustParsePrefix("100.70.0.0/16")
	used := map[netip.Addr]bool{}
	first, err := Next(n, used)
	if err != nil || first != netip.MustParseAddr("100.70.0.1") {
		t.Fatalf("first = %v %v", first, err)
	}
	used[first] = true
	used[netip.MustParseAddr("100.70.0.2")] = true
	got, _ := Next(n, used)
	if got != netip.MustParseAddr("100.70.0.3") {
		t.Fatalf("got %v", got)
	}
	delete(used, first)
	if got, _ := Next(n, used); got != first {
		t.Fatalf("freed address not reused: %v", got)
	}
	small := netip.MustParsePrefix("10.0.0.0/30")
	used = map[netip.Addr]bool{netip.MustParseAddr("10.0.0.1"): true, netip.MustParseAddr("10.0.0.2"): true}
	if _, err := Next(small, used); !errors.Is(err, ErrFull) {
		t.Fatalf("full network: %v", err)
	}
	// Never hands out network or broadcast addresses, and never collides.
	all := map[netip.Addr]bool{}
	tiny := netip.MustParsePrefix("10.1.0.0/24")
	for i := 0; i < 254; i++ {
		ip, err := Next(tiny, all)
		if err != nil {
			t.Fatal(err)
		}
		if ip == tiny.Addr() || ip == netip.MustParseAddr("10.1.0.255") || all[ip] {
			t.Fatalf("bad allocation %v", ip)
		}
		all[ip] = true
	}
	if _, err := Next(tiny, all); !errors.Is(err, ErrFull) {
		t.Fatalf("want full, got %v", err)
	}
}

func TestPick(t *testing.T) {
	n := netip.MustParsePrefix("10.9.0.0/24")
	used := map[netip.Addr]bool{}
	taken := func(ip netip.Addr) (bool, error) { return used[ip], nil }
	for range 200 {
		ip, err := Pick(n, taken)
		if errors.Is(err, ErrCrowded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !n.Contains(ip) || ip == n.Addr() || ip == netip.MustParseAddr("10.9.0.255") || used[ip] {
			t.Fatalf("bad pick %v", ip)
		}
		used[ip] = true
	}
	if len(used) < 150 {
		t.Fatalf("only %d of 254 addresses picked before giving up", len(used))
	}
	for i := 1; i < 255; i++ {
		used[netip.AddrFrom4([4]byte{10, 9, 0, byte(i)})] = true
	}
	if _, err := Pick(n, taken); !errors.Is(err, ErrCrowded) {
		t.Fatalf("full network: %v", err)
	}
}
