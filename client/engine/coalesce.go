package engine

import (
	"context"
	"sync"
	"time"
)

// coalescer hands requests to apply something (learned DNS answers) to
// the loop that owns applying it, and lets each requester wait, bounded,
// until an apply that started after its request is done. Requests that
// arrive while the loop is busy share the next apply: a burst of DNS
// answers costs one ruleset rebuild, not one each.
type coalescer struct {
	mu      sync.Mutex
	waiters []chan struct{}
	kick    chan struct{} // one pending request at most
}

func newCoalescer() *coalescer { return &coalescer{kick: make(chan struct{}, 1)} }

// ready is what the loop selects on; on it, the loop calls run.
func (c *coalescer) ready() <-chan struct{} {
	if c == nil {
		return nil // never ready
	}
	return c.kick
}

// run applies once for every request waiting and releases them.
func (c *coalescer) run(apply func()) {
	c.mu.Lock()
	ws := c.waiters
	c.waiters = nil
	c.mu.Unlock()
	if len(ws) == 0 {
		return // already served by an earlier run
	}
	apply()
	for _, w := range ws {
		close(w)
	}
}

// wait requests an apply and waits until one is done, ctx ends (a
// resolver or forwarder closing) or d passes (the loop is stuck or gone:
// the caller then goes on without it). It reports whether the apply was
// done.
func (c *coalescer) wait(ctx context.Context, d time.Duration) bool {
	if c == nil {
		return false // no loop to apply
	}
	done := make(chan struct{})
	c.mu.Lock()
	c.waiters = append(c.waiters, done)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default: // a request is pending: its run takes this one too
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}
