package resolver

import (
	"net/netip"
	"sync"
)

// Concurrency caps (Options leave them zero for these): a client flooding
// the resolver gets REFUSED once it has this many questions in flight,
// and so does everyone once the resolver as a whole has.
const (
	defaultPerSource = 64
	defaultTotal     = 1024
)

// limiter counts questions in flight per source address.
type limiter struct {
	perSource, total int

	mu       sync.Mutex
	inflight map[netip.Addr]int
	sum      int
}

func newLimiter(perSource, total int) *limiter {
	return &limiter{perSource: perSource, total: total, inflight: map[netip.Addr]int{}}
}

// acquire takes a slot for src; false when src or everyone is at the cap.
func (l *limiter) acquire(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sum >= l.total || l.inflight[src] >= l.perSource {
		return false
	}
	l.inflight[src]++
	l.sum++
	return true
}

func (l *limiter) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[src]--; l.inflight[src] <= 0 {
		delete(l.inflight, src)
	}
	l.sum--
}
