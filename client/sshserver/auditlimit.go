package sshserver

import (
	"fmt"
	"net/netip"
	"sync"
	"time"
)

// Refused events are the ones a client can make at will (a channel or a
// forward refused costs it one round trip), so they are bounded: a client
// must not hide its own session from the audit log by flooding the
// reporter's queue, nor flood management through it.
const (
	// maxAuditedRefusalsPerConn refusals of one connection are audited
	// one by one; those after it are counted and audited as one summary
	// when the connection ends.
	maxAuditedRefusalsPerConn = 8
	// maxRefusalsPerConn refused channels or forwards close the
	// connection: no legitimate client keeps asking for what it was
	// refused 32 times.
	maxRefusalsPerConn = 32
	// Per source (over all its connections and logins): a burst of
	// refusalBurst events, then one per refusalEvery; those past it are
	// counted and audited as one summary with the source's next refusal
	// that passes, or when one of its connections ends.
	refusalBurst = 16
	refusalEvery = 15 * time.Second
	// maxRefusalSources bounds the sources remembered.
	maxRefusalSources = 4096
)

// refusalLimiter is a token bucket per source for Refused events.
type refusalLimiter struct {
	now func() time.Time

	mu  sync.Mutex
	src map[netip.Addr]*refusalBucket
}

type refusalBucket struct {
	tokens     float64
	at         time.Time
	suppressed int // refusals not audited since the last one that was
}

func newRefusalLimiter(now func() time.Time) *refusalLimiter {
	return &refusalLimiter{now: now, src: map[netip.Addr]*refusalBucket{}}
}

// take spends a token of from's bucket for an event standing for weight
// refusals. ok: audit it;
// before it, a summary of the refusals suppressed (if any) goes along
// at no cost. Not ok: it was counted, to be summarized later.
func (l *refusalLimiter) take(from netip.Addr, weight int) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.bucket(from)
	if b.tokens < 1 {
		b.suppressed += weight
		return false, 0
	}
	b.tokens--
	suppressed, b.suppressed = b.suppressed, 0
	return true, suppressed
}

// flush takes the count of from's suppressed refusals for a summary, if
// its bucket has a token for it.
func (l *refusalLimiter) flush(from netip.Addr) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.src[from]
	if b == nil || b.suppressed == 0 {
		return 0
	}
	l.refill(b)
	if b.tokens < 1 {
		return 0
	}
	b.tokens--
	n := b.suppressed
	b.suppressed = 0
	return n
}

func (l *refusalLimiter) bucket(from netip.Addr) *refusalBucket {
	now := l.now()
	if b := l.src[from]; b != nil {
		l.refill(b)
		return b
	}
	if len(l.src) >= maxRefusalSources {
		// Forget sources whose bucket refilled and that owe no summary:
		// they lose nothing by it. Rare (thousands of sources refused at
		// once), so a scan is fine.
		for a, b := range l.src {
			if l.refill(b); b.tokens >= refusalBurst && b.suppressed == 0 {
				delete(l.src, a)
			}
		}
	}
	b := &refusalBucket{tokens: refusalBurst, at: now}
	if len(l.src) < maxRefusalSources {
		l.src[from] = b
	}
	// Else a busy table: this source gets a fresh bucket not remembered,
	// so its refusals are audited (the per-connection bound and the
	// reporter's queue still hold them in).
	return b
}

func (l *refusalLimiter) refill(b *refusalBucket) {
	now := l.now()
	if el := now.Sub(b.at); el > 0 {
		b.tokens = min(refusalBurst, b.tokens+float64(el)/float64(refusalEvery))
	}
	b.at = now
}

// auditRefusal audits e (a Refused event) within its source's bound,
// preceded by a summary of those suppressed before it.
func (s *Server) auditRefusal(e Event) { s.auditRefusals(e, 1) }

// auditRefusals is auditRefusal of an event standing for weight refusals
// (a summary).
func (s *Server) auditRefusals(e Event, weight int) {
	ok, n := s.refusals.take(e.Source, weight)
	if !ok {
		return
	}
	if n > 0 {
		s.audit(summary(e, n, "from this address"))
	}
	s.audit(e)
}

// summary is one Refused event standing for n refusals not audited one
// by one.
func summary(e Event, n int, where string) Event {
	return Event{Type: Refused, Source: e.Source, User: e.User, JWTUser: e.JWTUser,
		Reason: fmt.Sprintf("%d more refused %s, not reported one by one", n, where)}
}

// refusedChannel counts a refused channel or forward of c (after the
// client was answered, so it hears the last refusal before the close) and audits it
// within the connection's bound (then the source's); past
// maxRefusalsPerConn it closes the connection.
func (c *conn) refusedChannel(kind SessionKind, err error) {
	c.mu.Lock()
	c.refused++
	n := c.refused
	c.mu.Unlock()
	if n <= maxAuditedRefusalsPerConn {
		c.s.auditRefusal(c.event(Event{Type: Refused, Kind: kind, Reason: err.Error()}))
	}
	if n == maxRefusalsPerConn {
		c.s.log.Info("ssh connection closed: too many refused channels or forwards", "peer", c.peer, "ip", c.ip, "user", c.acc.Name, "refused", n)
		_ = c.sc.Close()
	}
}

// auditRefusalsEnd audits, as the connection ends, the refusals of c not
// audited one by one, and its source's suppressed ones if it may.
func (c *conn) auditRefusalsEnd() {
	c.mu.Lock()
	n := c.refused - maxAuditedRefusalsPerConn
	total := c.refused
	c.mu.Unlock()
	if n > 0 {
		where := "on this connection"
		if total >= maxRefusalsPerConn {
			where = fmt.Sprintf("on this connection (closed after %d refusals)", maxRefusalsPerConn)
		}
		c.s.auditRefusals(summary(c.event(Event{}), n, where), n)
	}
	if m := c.s.refusals.flush(c.ipAddr); m > 0 {
		c.s.audit(summary(c.event(Event{}), m, "from this address"))
	}
}

// event fills in who of e: c's source, local user and token user.
func (c *conn) event(e Event) Event {
	e.Source, e.JWTUser = c.ipAddr, c.jwtUser
	if e.User == "" {
		e.User = c.acc.Name
	}
	return e
}
