package sshaudit

import (
	"container/list"
	"sync"
	"time"
)

// limiter is a token bucket per reporter, its table bounded: when full,
// the least recently used bucket is forgotten if it refilled (an idle
// reporter), else a new reporter is refused until one does. Only the
// least recently used bucket is looked at, so a full table costs O(1) per
// new reporter, never a scan under the lock.
type limiter struct {
	burst float64
	every time.Duration
	max   int
	now   func() time.Time

	mu      sync.Mutex
	buckets map[string]*list.Element // of *bucket
	lru     list.List                // most recently used first
}

type bucket struct {
	key    string
	tokens float64
	at     time.Time
}

func newLimiter(burst int, every time.Duration, maxKeys int, now func() time.Time) *limiter {
	return &limiter{burst: float64(burst), every: every, max: maxKeys, now: now, buckets: map[string]*list.Element{}}
}

// take spends n tokens of k's bucket, all or none.
func (l *limiter) take(k string, n int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	el := l.buckets[k]
	if el == nil {
		if len(l.buckets) >= l.max && !l.evictIdle(now) {
			return false
		}
		el = l.lru.PushFront(&bucket{key: k, tokens: l.burst, at: now})
		l.buckets[k] = el
	} else {
		l.lru.MoveToFront(el)
	}
	b := el.Value.(*bucket)
	l.refill(b, now)
	if b.tokens < float64(n) {
		return false
	}
	b.tokens -= float64(n)
	return true
}

func (l *limiter) refill(b *bucket, now time.Time) {
	if el := now.Sub(b.at); el > 0 {
		b.tokens = min(l.burst, b.tokens+float64(el)/float64(l.every))
	}
	b.at = now
}

// evictIdle forgets the least recently used bucket if it refilled (its
// reporter lost nothing by being forgotten); it reports whether it did.
// Every other bucket was used more recently, so if this one is busy all
// may be.
func (l *limiter) evictIdle(now time.Time) bool {
	el := l.lru.Back()
	if el == nil {
		return false
	}
	b := el.Value.(*bucket)
	l.refill(b, now)
	if b.tokens < l.burst {
		return false
	}
	l.lru.Remove(el)
	delete(l.buckets, b.key)
	return true
}
