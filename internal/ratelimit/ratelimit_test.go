package ratelimit

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestFailures(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(Options{Burst: 3, Refill: 10 * time.Second, Now: func() time.Time { return now }})
	a := Key{Src: netip.MustParseAddr("192.0.2.1"), Subject: "a@example.com"}
	b := Key{Src: a.Src, Subject: "b@example.com"}
	for range 3 {
		r, err := l.Reserve(a)
		if err != nil {
			t.Fatalf("refused within the burst: %v", err)
		}
		r.Fail()
	}
	if _, err := l.Reserve(a); !errors.Is(err, ErrLimited) {
		t.Fatalf("past the burst: got %v, want ErrLimited", err)
	}
	r, err := l.Reserve(b)
	if err != nil {
		t.Fatalf("another subject of the same source is limited too: %v", err)
	}
	r.Fail()
	now = now.Add(10 * time.Second)
	r, err = l.Reserve(a)
	if err != nil {
		t.Fatalf("not forgiven after a refill period: %v", err)
	}
	r.Fail()
	if _, err := l.Reserve(a); err == nil {
		t.Fatal("a refill forgave more than one failure")
	}
	if lim, _ := l.Refused(); lim != 2 {
		t.Fatalf("refusals counted: got %d, want 2", lim)
	}
}

// TestSuccessCostsNothing: successes give their token back, so a key that
// only succeeds is never limited.
func TestSuccessCostsNothing(t *testing.T) {
	l := New(Options{Burst: 2, Refill: time.Hour, Now: func() time.Time { return time.Unix(0, 0) }})
	k := Key{Subject: "setup-key"}
	for i := range 100 {
		r, err := l.Reserve(k)
		if err != nil {
			t.Fatalf("success %d refused: %v", i, err)
		}
		r.Success()
		r.Fail() // settled already: no effect
	}
}

// TestReserveIsAtomic: N parallel evaluations of one key get at most the
// burst of reservations (a check followed by a separate spend let 34 of
// 60 through with a burst of 10).
func TestReserveIsAtomic(t *testing.T) {
	l := New(Options{Burst: 10, Refill: time.Hour, Now: func() time.Time { return time.Unix(0, 0) }})
	k := Key{Src: netip.MustParseAddr("192.0.2.1"), Subject: "x"}
	var granted atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			r, err := l.Reserve(k)
			if err != nil {
				return
			}
			granted.Add(1)
			time.Sleep(time.Millisecond) // the evaluation
			r.Fail()
		}()
	}
	close(start)
	wg.Wait()
	if g := granted.Load(); g != 10 {
		t.Fatalf("60 parallel failures: %d evaluated, want 10", g)
	}
}

// TestBounded: the table holds at most MaxKeys keys, a source at most
// MaxPerSource; keys whose buckets refilled make room, and new keys past
// the bound are refused with ErrFull, not evicted.
func TestBounded(t *testing.T) {
	now := time.Unix(0, 0)
	l := New(Options{Burst: 1, Refill: time.Minute, MaxKeys: 4, MaxPerSource: 2, Now: func() time.Time { return now }})
	src := netip.MustParseAddr("192.0.2.1")
	fail := func(k Key) error {
		r, err := l.Reserve(k)
		if err == nil {
			r.Fail()
		}
		return err
	}
	for _, s := range []string{"a", "b"} {
		if err := fail(Key{Src: src, Subject: s}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fail(Key{Src: src, Subject: "c"}); !errors.Is(err, ErrFull) {
		t.Fatalf("third subject of one source: got %v, want ErrFull", err)
	}
	for i := range 2 {
		if err := fail(Key{Src: netip.AddrFrom4([4]byte{198, 51, 100, byte(i)}), Subject: "a"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := fail(Key{Src: netip.MustParseAddr("203.0.113.1"), Subject: "a"}); !errors.Is(err, ErrFull) {
		t.Fatalf("fifth key: got %v, want ErrFull", err)
	}
	if l.Len() != 4 {
		t.Fatalf("%d keys tracked, want 4", l.Len())
	}
	now = now.Add(time.Minute)
	if err := fail(Key{Src: src, Subject: "c"}); err != nil {
		t.Fatalf("after the buckets refilled: %v", err)
	}
	if l.Len() != 1 {
		t.Fatalf("%d keys tracked after pruning, want 1", l.Len())
	}
	if _, full := l.Refused(); full != 2 {
		t.Fatalf("full refusals: got %d, want 2", full)
	}
}

func TestEvery(t *testing.T) {
	now := time.Unix(0, 0)
	e := NewEvery(10*time.Second, func() time.Time { return now })
	if ok, n := e.Allow(); !ok || n != 0 {
		t.Fatalf("first: %v %d", ok, n)
	}
	for range 5 {
		if ok, _ := e.Allow(); ok {
			t.Fatal("allowed within the period")
		}
	}
	now = now.Add(10 * time.Second)
	if ok, n := e.Allow(); !ok || n != 5 {
		t.Fatalf("after the period: %v %d, want true 5", ok, n)
	}
}
