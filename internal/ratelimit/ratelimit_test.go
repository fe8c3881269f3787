package ratelimit

import (
	"net/netip"
	"testing"
	"time"
)

func TestFailures(t *testing.T) {
	now := time.Unix(0, 0)
	f := New(3, 10*time.Second, func() time.Time { return now })
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	for range 3 {
		if !f.Allow(a) {
			t.Fatal("refused within the burst")
		}
		f.Fail(a)
	}
	if f.Allow(a) {
		t.Fatal("allowed past the burst")
	}
	if !f.Allow(b) {
		t.Fatal("another source is limited too")
	}
	now = now.Add(10 * time.Second)
	if !f.Allow(a) {
		t.Fatal("not forgiven after a refill period")
	}
	f.Fail(a)
	if f.Allow(a) {
		t.Fatal("a refill forgave more than one failure")
	}
	// The table stays bounded: full buckets are pruned when it is full.
	f.maxSize = 2
	now = now.Add(time.Hour)
	f.Fail(b)
	f.Fail(netip.MustParseAddr("192.0.2.3"))
	if f.Len() > 2 {
		t.Fatalf("%d sources tracked, max 2", f.Len())
	}
}
