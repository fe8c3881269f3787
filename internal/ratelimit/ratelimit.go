// Package ratelimit bounds how often something may fail: a token bucket
// per key (a source address and a subject such as an e-mail address),
// spent by failures only. A caller reserves a token before it evaluates a
// credential, atomically, so N parallel guesses get at most the burst of
// evaluations; a success gives the token back, a failure keeps it spent.
// The table of keys is bounded in count, overall and per source.
//
// It does not decide which credentials may skip the limit: callers that
// can check a credential cheaply (a setup key is one lookup by hash) do so
// and never refuse a valid one; callers whose check is the expensive part
// (a bcrypt password) reserve first.
package ratelimit

import (
	"errors"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"
)

// Key is what one bucket limits: failures from Src about Subject. A zero
// Src limits the subject over all sources; an empty Subject limits the
// source over all subjects.
type Key struct {
	Src     netip.Addr
	Subject string
}

// Options configure a limiter.
type Options struct {
	// Burst failures are allowed at once; one more per Refill.
	Burst  int
	Refill time.Duration
	// MaxKeys bounds the table (0: 10000); MaxPerSource bounds the
	// subjects tracked for one source (0: no bound beyond MaxKeys).
	MaxKeys, MaxPerSource int
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// Refusal reasons.
var (
	// ErrLimited: the key has no failures left.
	ErrLimited = errors.New("too many failures; wait and try again")
	// ErrFull: the key is not tracked and the table (or its source's share)
	// is full of keys that are failing right now.
	ErrFull = errors.New("too many sources or subjects failing at once; wait and try again")
)

// Limiter limits failures per Key.
type Limiter struct {
	o       Options
	limited atomic.Int64 // refusals: ErrLimited
	full    atomic.Int64 // refusals: ErrFull

	mu      sync.Mutex
	buckets map[Key]*bucket
	perSrc  map[netip.Addr]int // keys tracked per source (MaxPerSource only)
}

type bucket struct {
	tokens float64
	at     time.Time
	held   int // reservations not yet settled
}

// New returns a limiter. Burst and Refill must be positive.
func New(o Options) *Limiter {
	if o.Burst <= 0 {
		o.Burst = 1
	}
	if o.Refill <= 0 {
		o.Refill = time.Second
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = 10000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Limiter{o: o, buckets: map[Key]*bucket{}, perSrc: map[netip.Addr]int{}}
}

func (l *Limiter) level(b *bucket, now time.Time) float64 {
	return min(float64(l.o.Burst), b.tokens+float64(now.Sub(b.at))/float64(l.o.Refill))
}

// Reservation is one evaluation allowed by Reserve. Settle it with
// Success or Fail exactly once (further calls do nothing).
type Reservation struct {
	l       *Limiter
	k       Key
	settled atomic.Bool
}

// Reserve takes one of k's failures for an evaluation about to run, or
// refuses with ErrLimited or ErrFull when none is left. The token is taken
// under the lock: parallel callers cannot all pass a check and evaluate.
func (l *Limiter) Reserve(k Key) (*Reservation, error) {
	now := l.o.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[k]
	if b == nil {
		if err := l.room(k, now); err != nil {
			l.full.Add(1)
			return nil, err
		}
		b = &bucket{tokens: float64(l.o.Burst), at: now}
		l.buckets[k] = b
		if l.o.MaxPerSource > 0 {
			l.perSrc[k.Src]++
		}
	}
	lv := l.level(b, now)
	if lv < 1 {
		l.limited.Add(1)
		return nil, ErrLimited
	}
	b.tokens, b.at = lv-1, now
	b.held++
	return &Reservation{l: l, k: k}, nil
}

// room makes space for a new key (l.mu held): full buckets are forgotten
// when the table, or the source's share of it, is full.
func (l *Limiter) room(k Key, now time.Time) error {
	if len(l.buckets) >= l.o.MaxKeys || (l.o.MaxPerSource > 0 && l.perSrc[k.Src] >= l.o.MaxPerSource) {
		l.prune(now)
	}
	if len(l.buckets) >= l.o.MaxKeys || (l.o.MaxPerSource > 0 && l.perSrc[k.Src] >= l.o.MaxPerSource) {
		return ErrFull
	}
	return nil
}

// Success gives the token back: only failures count.
func (r *Reservation) Success() { r.settle(true) }

// Fail keeps the token spent.
func (r *Reservation) Fail() { r.settle(false) }

// settle ends the reservation once, refunding its token on success.
func (r *Reservation) settle(refund bool) {
	if r == nil || !r.settled.CompareAndSwap(false, true) {
		return
	}
	l := r.l
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.buckets[r.k]
	if b == nil {
		return
	}
	if refund {
		now := l.o.Now()
		b.tokens, b.at = min(float64(l.o.Burst), l.level(b, now)+1), now
	}
	b.held--
}

// prune forgets keys whose buckets are full again and not reserved (l.mu
// held), so the table holds only what is failing right now.
func (l *Limiter) prune(now time.Time) {
	for k, b := range l.buckets {
		if b.held == 0 && l.level(b, now) >= float64(l.o.Burst) {
			delete(l.buckets, k)
			if l.o.MaxPerSource > 0 {
				if l.perSrc[k.Src]--; l.perSrc[k.Src] <= 0 {
					delete(l.perSrc, k.Src)
				}
			}
		}
	}
}

// Len is how many keys are tracked.
func (l *Limiter) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buckets)
}

// Refused counts refusals since the start: limited keys, and new keys
// turned away because the table was full.
func (l *Limiter) Refused() (limited, full int64) { return l.limited.Load(), l.full.Load() }
