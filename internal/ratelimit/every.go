package ratelimit

import (
	"sync"
	"time"
)

// Every thins out a repeated event, such as a log line about refusals, so
// that a flood of them cannot flood the log: Allow says yes at most once
// per period and reports how many were held back since.
type Every struct {
	period time.Duration
	now    func() time.Time

	mu         sync.Mutex
	last       time.Time
	suppressed int
}

// NewEvery allows one event per period; now may be nil (time.Now).
func NewEvery(period time.Duration, now func() time.Time) *Every {
	if now == nil {
		now = time.Now
	}
	return &Every{period: period, now: now}
}

// Allow reports whether this event should go through, and how many were
// held back before it.
func (e *Every) Allow() (ok bool, suppressed int) {
	now := e.now()
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.last.IsZero() && now.Sub(e.last) < e.period {
		e.suppressed++
		return false, 0
	}
	e.last, suppressed, e.suppressed = now, e.suppressed, 0
	return true, suppressed
}
