// Package updates fans account changes out to the Sync streams of the
// affected peers. A notification is a coalescing wake-up, not data: each
// stream recomputes its own map, so a burst of changes costs one
// recomputation per stream. It also enforces "newest stream wins" per peer.
package updates

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

// Hub tracks open streams by account and peer.
type Hub struct {
	mu   sync.Mutex
	subs map[account.ID]map[account.PeerID]*Sub
}

// NewHub returns an empty hub.
func NewHub() *Hub { return &Hub{subs: map[account.ID]map[account.PeerID]*Sub{}} }

// Sub is one open stream's subscription.
type Sub struct {
	acc      account.ID
	peer     account.PeerID
	wake     chan struct{}
	replaced chan struct{}
	once     sync.Once
	// changed is when the oldest change the stream has not handled yet
	// happened (unix ns; 0: none), for fan-out latency.
	changed atomic.Int64
}

// Changed returns when the oldest change since the last call happened
// (the zero time if none) and forgets it.
func (s *Sub) Changed() time.Time {
	if n := s.changed.Swap(0); n != 0 {
		return time.Unix(0, n)
	}
	return time.Time{}
}

// Wake fires (coalesced) when the account changed.
func (s *Sub) Wake() <-chan struct{} { return s.wake }

// Replaced is closed when a newer stream of the same peer subscribed.
func (s *Sub) Replaced() <-chan struct{} { return s.replaced }

// Subscribe registers a stream, replacing (and signalling) any older one of
// the same peer.
func (h *Hub) Subscribe(acc account.ID, peer account.PeerID) *Sub {
	s := &Sub{acc: acc, peer: peer, wake: make(chan struct{}, 1), replaced: make(chan struct{})}
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[acc]
	if m == nil {
		m = map[account.PeerID]*Sub{}
		h.subs[acc] = m
	}
	if old := m[peer]; old != nil {
		old.once.Do(func() { close(old.replaced) })
	}
	m[peer] = s
	return s
}

// Unsubscribe removes s; it reports whether s was still the peer's current
// stream (false if a newer stream replaced it).
func (h *Hub) Unsubscribe(s *Sub) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	m := h.subs[s.acc]
	if m[s.peer] != s {
		return false
	}
	delete(m, s.peer)
	if len(m) == 0 {
		delete(h.subs, s.acc)
	}
	return true
}

// AccountChanged wakes every stream of the account without blocking.
func (h *Hub) AccountChanged(acc account.ID) {
	h.mu.Lock()
	defer h.mu.Unlock()
	now := time.Now().UnixNano()
	for _, s := range h.subs[acc] {
		s.changed.CompareAndSwap(0, now)
		select {
		case s.wake <- struct{}{}:
		default: // already pending: the stream will see this change too
		}
	}
}

// Streams is how many streams of the account are open.
func (h *Hub) Streams(acc account.ID) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs[acc])
}

// Accounts returns the accounts that have at least one open stream.
func (h *Hub) Accounts() []account.ID {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]account.ID, 0, len(h.subs))
	for a := range h.subs {
		out = append(out, a)
	}
	return out
}

// Subscribed lists the peers with an open stream, by account.
func (h *Hub) Subscribed() map[account.ID][]account.PeerID {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make(map[account.ID][]account.PeerID, len(h.subs))
	for acc, m := range h.subs {
		for p := range m {
			out[acc] = append(out[acc], p)
		}
	}
	return out
}

// Connected returns how many streams are open.
func (h *Hub) Connected() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, m := range h.subs {
		n += len(m)
	}
	return n
}
