// Package peerconns keeps, in memory, how each connected peer's
// connections to the other peers of its account go (P2P, relayed or
// still connecting), as wiremesh agents report it through SyncMeta
// (PeerSystemMeta.wiremeshConnections). It is live state like a peer's
// connected flag: a report lives while the peer's Sync stream on this
// instance does, and an agent resends it on every new stream, so a
// restart loses nothing for long. It does not read the store or check
// reports against the account: the caller resolves keys to peers of the
// reporter's account first (Resolve), so nothing foreign is ever kept.
package peerconns

import (
	"slices"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
)

// MaxEntries bounds one report: entries past it are ignored. An agent has
// one entry per remote peer; 4,096 covers the largest meshes we serve.
const MaxEntries = 4096

// Type is how a connection goes.
type Type uint8

const (
	Connecting Type = iota + 1
	P2P
	Relayed
)

// String is the type's REST spelling.
func (t Type) String() string {
	switch t {
	case Connecting:
		return "connecting"
	case P2P:
		return "p2p"
	case Relayed:
		return "relayed"
	}
	return "unknown"
}

// Entry is one reported connection, as the agent sent it.
type Entry struct {
	Key     key.Public
	Type    Type
	Latency time.Duration // 0: not measured
}

// Conn is one connection resolved to a peer of the reporter's account.
type Conn struct {
	Peer    account.PeerID
	Type    Type
	Latency time.Duration
}

// Counts sums a report by type.
type Counts struct{ P2P, Relayed, Connecting int }

type report struct {
	conns  []Conn
	counts Counts
}

type peerKey struct {
	acc account.ID
	id  account.PeerID
}

// MinInterval is the least time between two reports of a peer that are
// read: one admitted report costs a resolution against the account's
// peers, so a peer sending faster is capped (our agents report far less
// often; a dropped report is replaced by the next one).
const MinInterval = 500 * time.Millisecond

// Stream names one Sync stream's hold on its peer's report slot (Open),
// so that only that stream's end releases it.
type Stream uint64

// slot is an open stream of a peer.
type slot struct {
	stream Stream
	last   time.Time // when its last report was admitted; zero: none yet
}

// Tracker holds the reports of the peers whose Sync streams are open on
// this instance. The zero value is not usable: use New.
type Tracker struct {
	mu      sync.RWMutex
	next    Stream
	open    map[peerKey]slot
	reports map[peerKey]*report
	// changed learns (outside the lock) that what a peer's report shows
	// changed; nil: nobody.
	changed func(account.ID, account.PeerID)
}

// New returns an empty tracker. A nil *Tracker keeps nothing and
// reports nothing (a server built without one).
func New() *Tracker {
	return &Tracker{open: map[peerKey]slot{}, reports: map[peerKey]*report{}}
}

// NewNotifying returns an empty tracker that calls changed whenever what
// a peer's report shows changes: a connection to another peer appears,
// goes or changes type, or the report goes with its stream. A new
// latency alone is not a change (it moves with every report). changed
// must not block.
func NewNotifying(changed func(account.ID, account.PeerID)) *Tracker {
	t := New()
	t.changed = changed
	return t
}

// sameShape reports whether two sorted reports list the same peers with
// the same types.
func sameShape(a, b []Conn) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Peer != b[i].Peer || a[i].Type != b[i].Type {
			return false
		}
	}
	return true
}

// Open records that the peer's Sync stream is open and current: from now
// on its reports are kept. A report from a replaced stream stays until
// the agent sends a new one. The answer is for Close.
func (t *Tracker) Open(acc account.ID, id account.PeerID) Stream {
	if t == nil {
		return 0
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.next++
	t.open[peerKey{acc, id}] = slot{stream: t.next}
	return t.next
}

// Close forgets the peer's report: its stream s ended (it went offline,
// or to another instance, which will get its next report). When a newer
// stream of the peer opened in the meantime, the slot is that stream's
// and Close leaves it alone: an old stream ending just as its successor
// starts must not silence the successor's reports.
func (t *Tracker) Close(acc account.ID, id account.PeerID, s Stream) {
	if t == nil {
		return
	}
	k := peerKey{acc, id}
	t.mu.Lock()
	if cur, ok := t.open[k]; !ok || cur.stream != s {
		t.mu.Unlock()
		return
	}
	delete(t.open, k)
	_, had := t.reports[k]
	delete(t.reports, k)
	t.mu.Unlock()
	if had && t.changed != nil {
		t.changed(acc, id)
	}
}

// Admit says whether a report the peer sent at now is worth reading:
// only with its stream open here, and at most one per MinInterval. It is
// asked before anything is resolved, so a peer without a stream, or one
// sending in a loop, costs nothing but this lookup.
func (t *Tracker) Admit(acc account.ID, id account.PeerID, now time.Time) bool {
	if t == nil {
		return false
	}
	k := peerKey{acc, id}
	t.mu.Lock()
	defer t.mu.Unlock()
	cur, ok := t.open[k]
	if !ok {
		return false
	}
	// A clock stepped back (d < 0) admits: better one extra report than
	// none until the clock catches up.
	if d := now.Sub(cur.last); !cur.last.IsZero() && d >= 0 && d < MinInterval {
		return false
	}
	cur.last = now
	t.open[k] = cur
	return true
}

// Resolve turns a report's entries into connections to peers of the
// reporter's account: peerOf maps a WireGuard key to the account's peer
// holding it. Entries naming the reporter itself, a key of no peer of
// the account, an unknown type or a peer already listed are dropped;
// at most MaxEntries entries are read.
func Resolve(self account.PeerID, entries []Entry, peerOf func(key.Public) (account.PeerID, bool)) []Conn {
	if len(entries) > MaxEntries {
		entries = entries[:MaxEntries]
	}
	seen := make(map[account.PeerID]bool, len(entries))
	out := make([]Conn, 0, len(entries))
	for _, e := range entries {
		if e.Type < Connecting || e.Type > Relayed {
			continue
		}
		id, ok := peerOf(e.Key)
		if !ok || id == self || seen[id] {
			continue
		}
		seen[id] = true
		out = append(out, Conn{Peer: id, Type: e.Type, Latency: max(e.Latency, 0)})
	}
	return out
}

// Report replaces the peer's report with conns (resolved by Resolve). It
// is kept only while the peer's stream is open here; the answer says
// whether it was.
func (t *Tracker) Report(acc account.ID, id account.PeerID, conns []Conn) bool {
	if t == nil {
		return false
	}
	r := &report{conns: slices.Clone(conns)}
	slices.SortFunc(r.conns, func(a, b Conn) int {
		switch {
		case a.Peer < b.Peer:
			return -1
		case a.Peer > b.Peer:
			return 1
		}
		return 0
	})
	for _, c := range r.conns {
		switch c.Type {
		case P2P:
			r.counts.P2P++
		case Relayed:
			r.counts.Relayed++
		case Connecting:
			r.counts.Connecting++
		}
	}
	k := peerKey{acc, id}
	t.mu.Lock()
	if _, ok := t.open[k]; !ok {
		t.mu.Unlock()
		return false
	}
	old, had := t.reports[k]
	t.reports[k] = r
	t.mu.Unlock()
	if t.changed != nil && (!had || !sameShape(old.conns, r.conns)) {
		t.changed(acc, id)
	}
	return true
}

// Of returns the peer's reported connections (by peer ID) and whether it
// has a report.
func (t *Tracker) Of(acc account.ID, id account.PeerID) ([]Conn, bool) {
	if t == nil {
		return nil, false
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	r, ok := t.reports[peerKey{acc, id}]
	if !ok {
		return nil, false
	}
	return slices.Clone(r.conns), true
}

// CountsOf fills counts[i] and has[i] for ids[i], under one lock: the
// REST peer list asks for every peer of an account at once.
func (t *Tracker) CountsOf(acc account.ID, ids func(i int) account.PeerID, n int, counts []Counts, has []bool) {
	if t == nil {
		clear(has[:n])
		return
	}
	t.mu.RLock()
	defer t.mu.RUnlock()
	if len(t.reports) == 0 {
		clear(has[:n])
		return
	}
	for i := range n {
		r, ok := t.reports[peerKey{acc, ids(i)}]
		has[i] = ok
		if ok {
			counts[i] = r.counts
		}
	}
}
