package httpapi

import "testing"

// TestBounded: the caches' map stays within its entry and size bounds,
// refuses an entry larger than the size bound alone, and lets keepOld
// keep the current entry.
func TestBounded(t *testing.T) {
	b := newBounded[string](3, 10, func(v int) int { return v })
	check := func(wantLen, wantUsed int) {
		t.Helper()
		if len(b.m) != wantLen || b.used != wantUsed {
			t.Fatalf("%d entries, %d used; want %d, %d", len(b.m), b.used, wantLen, wantUsed)
		}
		sum := 0
		for _, v := range b.m {
			sum += v
		}
		if sum != b.used {
			t.Fatalf("used %d, entries sum to %d", b.used, sum)
		}
	}
	b.put("a", 2, nil)
	b.put("b", 2, nil)
	b.put("c", 2, nil)
	check(3, 6)
	b.put("d", 2, nil) // one too many: another goes
	check(3, 6)
	if _, ok := b.get("d"); !ok {
		t.Fatal("the new entry was not kept")
	}
	b.put("e", 9, nil) // needs room for 9 of 10: all others go
	check(1, 9)
	b.put("f", 11, nil) // larger than the bound alone
	check(1, 9)
	if _, ok := b.get("f"); ok {
		t.Fatal("an entry over the size bound was kept")
	}
	b.put("e", 1, func(old int) bool { return old > 1 })
	if v, _ := b.get("e"); v != 9 {
		t.Fatalf("keepOld said keep: got %d", v)
	}
	b.put("e", 1, nil)
	check(1, 1)
	b.remove("e")
	check(0, 0)
}
