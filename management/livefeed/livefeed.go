// Package livefeed fans account changes out to the REST API's live event
// streams (GET /api/events/stream): a publisher says which kinds of
// resources of an account changed (peers, groups, ...), and each open
// stream of that account learns it, coalesced, without blocking the
// publisher. Like package updates it carries wake-ups, not data: a stream
// tells its client which list to refetch through the normal REST API.
//
// It does not authorize anything or read the store: the REST boundary
// decides which kinds a caller may hear (by role) and resolves
// peer-scoped changes to their owners for callers that see only their own
// peers. It also does not know about other management instances; the
// server's change watcher publishes what they change.
package livefeed

import (
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/wiremesh/wiremesh/management/account"
)

// Kind is a set of resource kinds that changed; each bit is one kind.
type Kind uint16

const (
	// Peers: the peer list (a peer added, removed, renamed, online or
	// offline, its connection report).
	Peers Kind = 1 << iota
	Groups
	// Policies covers posture checks too.
	Policies
	SetupKeys
	Users
	Routes
	Networks
	// DNS covers nameserver groups, DNS settings and custom zones.
	DNS
	// Events: the activity log.
	Events
	// Account: the account's settings.
	Account

	// AllKinds is every kind.
	AllKinds = Account<<1 - 1
)

// What each domain service's change notifications publish, defined once
// for the server's wiring and the tests. A service notifies after any
// change to the network it manages; these are the lists that may show it.
const (
	// PeerServiceKinds: an agent's login, meta change, expiry or a peer
	// update changes the peer list and logs an event; group and policy
	// lists show no peer data, and the group counts a registration or
	// deletion moves are published apart (PeerServiceMembership), so
	// every agent login does not make those pages refetch.
	PeerServiceKinds = Peers | Events
	// PeerServiceMembership: a peer joined or left the account, so group
	// peer counts moved, and a temporary peer's policies came or went
	// with it.
	PeerServiceMembership = Groups | Policies
	// UserServiceKinds: users, their peers (a deleted user's go with it),
	// auto-groups, settings and the activity log.
	UserServiceKinds = Users | Peers | Groups | Events | Account
	// AccessServiceKinds: groups, policies (posture checks), setup keys
	// and the peers' group memberships.
	AccessServiceKinds = Groups | Policies | SetupKeys | Peers | Events
	// RoutingServiceKinds: routes, networks and their groups.
	RoutingServiceKinds = Routes | Networks | Groups | Events
	// DNSServiceKinds: nameservers, settings and zones.
	DNSServiceKinds = DNS | Events
)

// names are the kinds' wire names (the SSE event field), in bit order.
var names = [...]string{"peers", "groups", "policies", "setup-keys", "users", "routes", "networks", "dns", "events", "account"}

// Each calls fn with every single kind of k, in a fixed order.
func (k Kind) Each(fn func(Kind)) {
	for i := range names {
		if b := Kind(1) << i; k&b != 0 {
			fn(b)
		}
	}
}

// String is the wire name of a single kind, or the names of a set joined
// by commas.
func (k Kind) String() string {
	var out []string
	k.Each(func(b Kind) {
		for i := range names {
			if b == 1<<i {
				out = append(out, names[i])
			}
		}
	})
	return strings.Join(out, ",")
}

// ErrTooManyStreams refuses a subscription past a limit.
var ErrTooManyStreams = errors.New("too many live event streams")

// ErrClosed refuses a subscription after Close.
var ErrClosed = errors.New("live event streams are shutting down")

// Options are a feed's limits (zero fields: the defaults).
type Options struct {
	// MaxPerUser bounds one user's open streams (0: 16, a browser with
	// many dashboard tabs).
	MaxPerUser int
	// MaxPerAccount bounds an account's open streams (0: 500).
	MaxPerAccount int
	// MaxStreams bounds the open streams of all accounts together (0:
	// 5000): each holds a connection and a goroutine.
	MaxStreams int
}

// maxPendingPeers bounds the peer-scoped changes a stream remembers
// between two reads; past it the stream only knows "many peers".
const maxPendingPeers = 256

// Feed holds the open streams by account. Its methods are safe for
// concurrent use; the zero value is not usable: use New.
type Feed struct {
	maxUser, maxAcc, maxAll int

	mu     sync.Mutex
	closed bool
	subs   map[account.ID]map[*Sub]struct{}
	n      int // open streams of all accounts
}

// New returns an empty feed.
func New(o Options) *Feed {
	if o.MaxPerUser <= 0 {
		o.MaxPerUser = 16
	}
	if o.MaxPerAccount <= 0 {
		o.MaxPerAccount = 500
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = 5000
	}
	return &Feed{maxUser: o.MaxPerUser, maxAcc: o.MaxPerAccount, maxAll: o.MaxStreams, subs: map[account.ID]map[*Sub]struct{}{}}
}

// Sub is one open stream's subscription.
type Sub struct {
	f    *Feed
	acc  account.ID
	user account.UserID
	wake chan struct{}
	done chan struct{}
	once sync.Once

	mu      sync.Mutex
	pending Pending
}

// Pending is what changed since a stream last looked.
type Pending struct {
	// Kinds changed account-wide.
	Kinds Kind
	// Peers are peers that changed (online, offline, connection report,
	// renamed, approved, deleted...), each with its owner: a Peers change
	// that concerns that user (and callers who see every peer) alone. An
	// empty owner is unknown to the publisher: the stream resolves it.
	Peers map[account.PeerID]account.UserID
	// ManyPeers: more peer-scoped changes than Peers keeps.
	ManyPeers bool
	// Serial is the highest network serial a change made elsewhere (by
	// another process sharing the store) brought; 0: none. What changed
	// is unknown: a stream that has not yet told its client of that
	// serial tells every kind.
	Serial uint64
}

// Empty reports whether nothing is pending.
func (p Pending) Empty() bool {
	return p.Kinds == 0 && len(p.Peers) == 0 && !p.ManyPeers && p.Serial == 0
}

// Subscribe opens a stream of user's changes in acc. It fails with
// ErrTooManyStreams past a limit (the message names it) and with
// ErrClosed after Close.
func (f *Feed) Subscribe(acc account.ID, user account.UserID) (*Sub, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil, ErrClosed
	}
	if f.n >= f.maxAll {
		return nil, fmt.Errorf("%w: the server has %d open (the limit)", ErrTooManyStreams, f.n)
	}
	m := f.subs[acc]
	if len(m) >= f.maxAcc {
		return nil, fmt.Errorf("%w: the account has %d open (the limit); close dashboards or scripts that stream", ErrTooManyStreams, len(m))
	}
	n := 0
	for s := range m {
		if s.user == user {
			n++
		}
	}
	if n >= f.maxUser {
		return nil, fmt.Errorf("%w: this user has %d open (the limit); close other dashboard tabs or scripts that stream", ErrTooManyStreams, n)
	}
	if m == nil {
		m = map[*Sub]struct{}{}
		f.subs[acc] = m
	}
	s := &Sub{f: f, acc: acc, user: user, wake: make(chan struct{}, 1), done: make(chan struct{})}
	m[s] = struct{}{}
	f.n++
	return s, nil
}

// Publish tells the account's streams that kinds changed. It never
// blocks.
func (f *Feed) Publish(acc account.ID, kinds Kind) {
	kinds &= AllKinds
	if kinds == 0 {
		return
	}
	f.each(acc, func(p *Pending) { p.Kinds |= kinds })
}

// External tells the account's streams that a change made elsewhere
// moved its network serial to serial.
func (f *Feed) External(acc account.ID, serial uint64) {
	f.each(acc, func(p *Pending) { p.Serial = max(p.Serial, serial) })
}

// PeerChanged tells the account's streams that one peer changed: it went
// online or offline, reported its connections, or someone renamed,
// approved or deleted it. owner is the peer's user ("": unknown to the
// caller, or none), so a stream of a user who sees only its own peers
// learns of changes others make to them, deletions included.
func (f *Feed) PeerChanged(acc account.ID, peer account.PeerID, owner account.UserID) {
	f.each(acc, func(p *Pending) {
		if p.ManyPeers {
			return
		}
		if len(p.Peers) >= maxPendingPeers {
			p.Peers, p.ManyPeers = nil, true
			return
		}
		if p.Peers == nil {
			p.Peers = map[account.PeerID]account.UserID{}
		}
		if owner != "" || p.Peers[peer] == "" {
			p.Peers[peer] = owner
		}
	})
}

// MembershipChanged tells the account's streams that a peer joined or
// left it (the peers service's StateNotifier).
func (f *Feed) MembershipChanged(acc account.ID) { f.Publish(acc, PeerServiceMembership) }

func (f *Feed) each(acc account.ID, fn func(*Pending)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for s := range f.subs[acc] {
		s.mu.Lock()
		fn(&s.pending)
		s.mu.Unlock()
		select {
		case s.wake <- struct{}{}:
		default: // already pending: the stream will see this change too
		}
	}
}

// Streams is how many streams of the account are open.
func (f *Feed) Streams(acc account.ID) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs[acc])
}

// Close ends every stream (their Done channels close) and refuses new
// ones. It is idempotent.
func (f *Feed) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
	for acc, m := range f.subs {
		for s := range m {
			s.once.Do(func() { close(s.done) })
		}
		delete(f.subs, acc)
	}
	f.n = 0
}

// Wake fires (coalesced) when something is pending.
func (s *Sub) Wake() <-chan struct{} { return s.wake }

// Done is closed when the feed shuts down or the subscription closes.
func (s *Sub) Done() <-chan struct{} { return s.done }

// Requeue puts back what a Take returned that the stream could not tell
// yet, merged with what came since, without waking it.
func (s *Sub) Requeue(p Pending) {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := &s.pending
	q.Kinds |= p.Kinds
	q.Serial = max(q.Serial, p.Serial)
	q.ManyPeers = q.ManyPeers || p.ManyPeers
	for id, owner := range p.Peers {
		if q.ManyPeers {
			break
		}
		if len(q.Peers) >= maxPendingPeers {
			q.Peers, q.ManyPeers = nil, true
			break
		}
		if q.Peers == nil {
			q.Peers = map[account.PeerID]account.UserID{}
		}
		if cur, ok := q.Peers[id]; !ok || cur == "" {
			q.Peers[id] = owner
		}
	}
	if q.ManyPeers {
		q.Peers = nil
	}
}

// Take returns what is pending and forgets it.
func (s *Sub) Take() Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.pending
	s.pending = Pending{}
	return p
}

// Close unsubscribes. It is idempotent.
func (s *Sub) Close() {
	s.f.mu.Lock()
	defer s.f.mu.Unlock()
	if m := s.f.subs[s.acc]; m != nil {
		if _, ok := m[s]; ok {
			s.f.n--
		}
		delete(m, s)
		if len(m) == 0 {
			delete(s.f.subs, s.acc)
		}
	}
	s.once.Do(func() { close(s.done) })
}

// AccountNotifier is what the domain services tell of a change.
type AccountNotifier interface {
	AccountChanged(id account.ID)
}

// Notifier passes a domain service's change notifications on to Next
// (the Sync fan-out) and publishes them to the feed as Kinds: a service
// that changes groups, policies and setup keys announces all three.
type Notifier struct {
	Next  AccountNotifier // nil: none
	Feed  *Feed
	Kinds Kind
}

// AccountChanged implements the domain services' notifier.
func (n Notifier) AccountChanged(id account.ID) {
	if n.Next != nil {
		n.Next.AccountChanged(id)
	}
	n.Feed.Publish(id, n.Kinds)
}
