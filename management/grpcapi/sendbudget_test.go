package grpcapi

import (
	"context"
	"sync"
	"testing"
	"time"
)

// The budget grants in order, never beyond its size, and a waiter that
// gives up takes nothing and lets those behind it through.
func TestBudgetFIFOAndCancel(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	if n, err := b.acquire(ctx, 60); err != nil || n != 60 {
		t.Fatalf("acquire 60: %d, %v", n, err)
	}
	// Larger than the budget: clamped, so it can be granted at all.
	got := make(chan string, 3)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); n, _ := b.acquire(ctx, 500); got <- "big"; b.release(n) }()
	waitWaiters(t, b, 1)
	cctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { _, err := b.acquire(cctx, 10); errc <- err }()
	waitWaiters(t, b, 2)
	wg.Add(1)
	go func() { defer wg.Done(); n, _ := b.acquire(ctx, 30); got <- "small"; b.release(n) }()
	waitWaiters(t, b, 3)
	// 40 free: "small" (30) fits but must wait its turn behind "big".
	select {
	case g := <-got:
		t.Fatalf("%s granted out of turn", g)
	case <-time.After(50 * time.Millisecond):
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled acquire succeeded")
	}
	b.release(60)
	wg.Wait()
	if a, c := <-got, <-got; a != "big" || c != "small" {
		t.Fatalf("order %s, %s", a, c)
	}
	if b.inUse() != 0 {
		t.Fatalf("%d bytes still held", b.inUse())
	}
}

// Shares moved to the overflow free the budget for others, up to the
// overflow's size, and are given back from there.
func TestBudgetOverflow(t *testing.T) {
	b := newBudget(100)
	ctx := context.Background()
	a, _ := b.acquire(ctx, 80)
	if !b.toOverflow(a) {
		t.Fatal("overflow refused a share that fits")
	}
	c, _ := b.acquire(ctx, 90) // room again
	if b.toOverflow(c) {
		t.Fatal("overflow took more than its size")
	}
	if b.inUse() != 170 {
		t.Fatalf("in use %d, want 170", b.inUse())
	}
	b.releaseOverflow(a)
	b.release(c)
	if b.inUse() != 0 {
		t.Fatalf("in use %d after release", b.inUse())
	}
}

func waitWaiters(t *testing.T, b *budget, n int) {
	t.Helper()
	for range 200 {
		b.mu.Lock()
		k := len(b.waiters)
		b.mu.Unlock()
		if k == n {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("never %d waiters", n)
}

func TestBufPool(t *testing.T) {
	var p bufPool
	b := p.get(5000)
	if len(b) != 0 || cap(b) != 8192 {
		t.Fatalf("get(5000): len %d cap %d", len(b), cap(b))
	}
	b = append(b, "data"...)
	p.put(b)
	p.put(make([]byte, 0, 5000)) // not a class size: dropped
	if c := cap(p.get(4097)); c != 8192 {
		t.Fatalf("cap %d", c)
	}
	if c := cap(p.get(1 << 28)); c != 1<<28 {
		t.Fatalf("huge buffer cap %d", c)
	}
	var nilPool *bufPool
	if c := cap(nilPool.get(10)); c != 10 {
		t.Fatalf("nil pool cap %d", c)
	}
	nilPool.put(b)
}
