// Package ratelimit bounds how often one source may fail: a token bucket
// per source address, spent by failures only, so a setup-key guesser is
// slowed to a trickle while machines that present valid keys never notice.
package ratelimit

import (
	"net/netip"
	"sync"
	"time"
)

// Failures limits failures per source.
type Failures struct {
	burst  float64
	refill time.Duration // one failure forgiven per refill
	now    func() time.Time

	mu      sync.Mutex
	buckets map[netip.Addr]*bucket
	maxSize int
}

type bucket struct {
	tokens float64
	at     time.Time
}

// New allows burst failures at once and one more per refill. now may be
// nil (time.Now).
func New(burst int, refill time.Duration, now func() time.Time) *Failures {
	if now == nil {
		now = time.Now
	}
	return &Failures{burst: float64(burst), refill: refill, now: now, buckets: map[netip.Addr]*bucket{}, maxSize: 100000}
}

func (f *Failures) level(b *bucket, now time.Time) float64 {
	return min(f.burst, b.tokens+float64(now.Sub(b.at))/float64(f.refill))
}

// Allow reports whether src may try again (it has failures left).
func (f *Failures) Allow(src netip.Addr) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buckets[src]
	return b == nil || f.level(b, f.now()) >= 1
}

// Fail spends one of src's failures.
func (f *Failures) Fail(src netip.Addr) {
	now := f.now()
	f.mu.Lock()
	defer f.mu.Unlock()
	b := f.buckets[src]
	if b == nil {
		if len(f.buckets) >= f.maxSize {
			f.prune(now)
		}
		b = &bucket{tokens: f.burst, at: now}
		f.buckets[src] = b
	}
	b.tokens, b.at = max(0, f.level(b, now)-1), now
}

// prune forgets sources whose buckets are full again (f.mu held), so the
// table stays bounded by the sources failing right now.
func (f *Failures) prune(now time.Time) {
	for k, b := range f.buckets {
		if f.level(b, now) >= f.burst {
			delete(f.buckets, k)
		}
	}
}

// Len is how many sources are tracked.
func (f *Failures) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.buckets)
}
