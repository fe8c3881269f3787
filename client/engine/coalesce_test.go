package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestCoalescer: requests made while the loop is busy share one apply,
// every requester is released only after an apply that started after its
// request, and a wait without a loop ends with its bound or its context.
func TestCoalescer(t *testing.T) {
	c := newCoalescer()
	var applies atomic.Int32
	const n = 20
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loopDone := make(chan struct{})
	release := make(chan struct{})
	busy := make(chan struct{})
	go func() {
		defer close(loopDone)
		first := true
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.ready():
				c.run(func() {
					if first {
						close(busy)
						<-release // busy while the burst arrives
						first = false
					}
					applies.Add(1)
				})
			}
		}
	}()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); c.wait(ctx, time.Minute) }()
	<-busy // the loop took the first request
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !c.wait(ctx, time.Minute) {
				t.Error("wait ended without an apply")
			}
			if applies.Load() < 2 {
				// The running apply started before the request.
				t.Error("released before an apply that started after its request")
			}
		}()
	}
	for c.waiterCount() != n {
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	if got := applies.Load(); got != 2 {
		t.Errorf("%d applies for a burst of %d requests behind a busy loop, want 2", got, n)
	}
	cancel()
	<-loopDone

	lonely := newCoalescer()
	if lonely.wait(context.Background(), 20*time.Millisecond) {
		t.Error("wait without a loop reported an apply")
	}
	cctx, ccancel := context.WithCancel(context.Background())
	ccancel()
	t0 := time.Now()
	if lonely.wait(cctx, time.Minute) || time.Since(t0) > 5*time.Second {
		t.Error("a cancelled wait did not end at once")
	}
}

func (c *coalescer) waiterCount() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waiters)
}
