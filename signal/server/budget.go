package server

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wiremesh/wiremesh/proto/signalpb"
)

// Drop reasons, the values of signal_messages_dropped_total's reason label.
const (
	dropAbsent      = "absent"       // destination not connected (here or, with a bus, anywhere)
	dropDestFull    = "dest_full"    // destination's queue at its message or byte cap
	dropSourceFull  = "source_full"  // sender's queued messages at their cap
	dropTotalFull   = "total_full"   // every queue together at the server's cap
	dropForged      = "forged"       // sender key not the one this stream or connection registered
	dropStreamEnded = "stream_ended" // queued for a stream that ended before sending it
)

var dropReasons = []string{dropAbsent, dropDestFull, dropSourceFull, dropTotalFull, dropForged, dropStreamEnded}

// msgOverhead is what a queued message costs beyond its encoded size
// (the struct, its strings' headers, the queue slot), so that a flood of
// empty messages is bounded in bytes too.
const msgOverhead = 256

// transportAllowance is how much of a sent message may sit in one
// stream's HTTP/2 send buffer uncounted: grpc-go lets a stream queue up to
// 64 KiB before Send blocks, whatever the reader does. The part of a
// bigger message beyond it stays charged to the destination and to the
// total until the stream's next Send returns (which proves the reader took
// it) or the stream ends.
const transportAllowance = 64 << 10

// usage is what is queued for, or from, one party.
type usage struct {
	msgs  int
	bytes int64
}

func (u *usage) fits(n int64, maxMsgs int, maxBytes int64) bool {
	return u.msgs+1 <= maxMsgs && u.bytes+n <= maxBytes
}

// queued is one admitted message and what it was charged.
type queued struct {
	msg  *signalpb.EncryptedMessage
	src  string
	size int64
}

// budget caps what the server holds for delivery: per destination, per
// source (the sender key) and in total, in messages and in bytes. A
// message is charged when admitted and released when its stream's Send
// returns (see transportAllowance), so the caps cover the queues, the
// message being written and what the transport holds beyond a small
// per-stream allowance.
type budget struct {
	lim Limits

	mu      sync.Mutex
	total   usage
	sources map[string]*usage // entries removed when empty: bounded by total.msgs

	dropped map[string]*atomic.Uint64 // by reason; fixed at construction
}

func newBudget(lim Limits) *budget {
	b := &budget{lim: lim, sources: map[string]*usage{}, dropped: map[string]*atomic.Uint64{}}
	for _, r := range dropReasons {
		b.dropped[r] = new(atomic.Uint64)
	}
	return b
}

func (b *budget) drop(reason string) { b.dropped[reason].Add(1) }

// enqueue charges q and puts it on r's queue, or says why it cannot.
// Admission and the queue send happen under one lock, so a stream that
// retires (which also takes it) never leaves a charged message behind.
func (b *budget) enqueue(r *registration, q queued) (reason string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if r.retired {
		return dropStreamEnded
	}
	if !r.use.fits(q.size, b.lim.DestMessages, b.lim.DestBytes) {
		return dropDestFull
	}
	src := b.sources[q.src]
	if src == nil {
		src = &usage{}
	}
	if !src.fits(q.size, b.lim.SourceMessages, b.lim.SourceBytes) {
		return dropSourceFull
	}
	if !b.total.fits(q.size, b.lim.TotalMessages, b.lim.TotalBytes) {
		return dropTotalFull
	}
	select {
	case r.out <- q:
	default:
		// Cannot happen: the queue holds DestMessages and r.use counts
		// every message in it. Refuse rather than block.
		return dropDestFull
	}
	b.sources[q.src] = src
	for _, u := range []*usage{&r.use, src, &b.total} {
		u.msgs++
		u.bytes += q.size
	}
	return ""
}

// sent releases q after r's Send returned, and with it the excess of the
// message sent before (the reader has taken it, or Send would still be
// blocked). ok reports whether Send succeeded: only then may q's own
// excess stay in the transport.
func (b *budget) sent(r *registration, q queued, ok bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.releaseHeld(r)
	b.release(r, q, 1, q.size)
	if ok && q.size > transportAllowance {
		r.held = q.size - transportAllowance
		r.heldSince = time.Now()
		r.use.bytes += r.held
		b.total.bytes += r.held
	}
}

// retire stops admissions to r and releases everything charged to it.
// Only the stream's writer calls it, after its last Send returned.
func (b *budget) retire(r *registration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r.retired = true
	b.releaseHeld(r)
	for {
		select {
		case q := <-r.out:
			b.release(r, q, 1, q.size)
			b.dropped[dropStreamEnded].Add(1)
		default:
			return
		}
	}
}

// shut stops admissions to r at once (the stream ended; its writer may
// still be blocked in Send).
func (b *budget) shut(r *registration) {
	b.mu.Lock()
	r.retired = true
	b.mu.Unlock()
}

func (b *budget) releaseHeld(r *registration) {
	r.use.bytes -= r.held
	b.total.bytes -= r.held
	r.held = 0
}

func (b *budget) release(r *registration, q queued, msgs int, bytes int64) {
	r.use.msgs -= msgs
	r.use.bytes -= bytes
	b.total.msgs -= msgs
	b.total.bytes -= bytes
	if src := b.sources[q.src]; src != nil {
		src.msgs -= msgs
		src.bytes -= bytes
		if src.msgs <= 0 {
			delete(b.sources, q.src)
		}
	}
}

// heldLongerThan reports whether r has held a sent message's excess
// (its reader has not shown it took it) for longer than d.
func (b *budget) heldLongerThan(r *registration, d time.Duration) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return r.held > 0 && time.Since(r.heldSince) > d
}

// snapshot reports the totals and the number of sources with messages queued.
func (b *budget) snapshot() (total usage, sources int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.total, len(b.sources)
}
