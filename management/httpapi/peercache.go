package httpapi

import (
	"errors"
	"net/http"
	"reflect"
	"strconv"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// Bounds of the peer-list cache: accounts kept, and their encoded lists'
// bytes in all (a peer is about 1.5 KB, JSON and fields).
const (
	maxPeerListAccounts = 64
	maxPeerListBytes    = 256 << 20
)

// peerListCache keeps, per account, the peer list as callers who see
// every peer get it (GET /api/peers), encoded but for the fields that
// change on their own: connected and last_seen (read fresh, narrowly, on
// every request), login_expired (derived from them and the time) and
// accessible_peers_count (reachCache). An entry is keyed by the account
// row (its network serial, domain and settings) and its view revision,
// both read from the store in the request before the list is, so it is
// right on any number of management instances sharing one database:
// every write of a peer's stored fields or of a group bumps the view
// revision (store.AccountTx.ViewRevision).
type peerListCache struct {
	b *bounded[account.ID, *peerList]
}

// peerList is one account's encoded list.
type peerList struct {
	acc   account.Account
	rev   uint64
	buf   []byte // every peer's head, middle and tail, one after another
	peers []listedPeer
	index map[account.PeerID]int // into peers
}

// listedPeer is one peer of a peerList: its stored fields (for the
// filters and login expiry) and where its parts end in buf.
type listedPeer struct {
	p               account.Peer
	ip              string
	head, mid, tail int
	seen            string // ts(p.LastSeen), reused while it is unchanged
}

func newPeerListCache() *peerListCache {
	return &peerListCache{newBounded[account.ID](maxPeerListAccounts, maxPeerListBytes, (*peerList).size)}
}

func (l *peerList) size() int { return len(l.buf) + 600*len(l.peers) }

// appendPeer appends the i-th peer with its connection state, login
// expiry at now and, when count is not negative, its count of accessible
// peers.
func (l *peerList) appendPeer(b []byte, i int, s store.PeerState, now time.Time, count int) []byte {
	lp := &l.peers[i]
	from := 0
	if i > 0 {
		from = l.peers[i-1].tail
	}
	p := lp.p
	p.Connected, p.LastSeen = s.Connected, s.LastSeen
	b = append(b, l.buf[from:lp.head]...)
	b = appendBool(b, `,"connected":`, p.Connected)
	seen := lp.seen
	if !p.LastSeen.Equal(lp.p.LastSeen) {
		seen = ts(p.LastSeen)
	}
	b = appendField(b, `,"last_seen":`, seen)
	b = append(b, l.buf[lp.head:lp.mid]...)
	b = appendBool(b, `,"login_expired":`, l.acc.Settings.Expired(p, now))
	b = append(b, l.buf[lp.mid:lp.tail]...)
	if count >= 0 {
		b = strconv.AppendInt(append(b, `,"accessible_peers_count":`...), int64(count), 10)
	}
	return append(b, '}')
}

func (c *peerListCache) get(acc account.Account, rev uint64) (*peerList, bool) {
	l, ok := c.b.get(acc.ID)
	if !ok || l.rev != rev || !reflect.DeepEqual(l.acc, acc) {
		return nil, false
	}
	return l, true
}

// put keeps l, evicting other accounts' lists past the bounds.
func (c *peerListCache) put(l *peerList) { c.b.put(l.acc.ID, l, nil) }

// encodePeerList encodes the parts of every peer of v (which holds all of
// the account's peers).
func encodePeerList(v peerView, rev uint64, now time.Time) *peerList {
	l := &peerList{acc: v.acc, rev: rev, buf: make([]byte, 0, 1024*len(v.peers)), peers: make([]listedPeer, len(v.peers)),
		index: make(map[account.PeerID]int, len(v.peers))}
	for i, p := range v.peers {
		l.index[p.ID] = i
		j := v.toPeer(p, now)
		lp := &l.peers[i]
		lp.p, lp.ip, lp.seen = p, j.IP, j.LastSeen
		l.buf = j.appendHead(l.buf)
		lp.head = len(l.buf)
		l.buf = j.appendMiddle(l.buf)
		lp.mid = len(l.buf)
		l.buf = j.appendTail(l.buf)
		lp.tail = len(l.buf)
	}
	return l
}

// listAllPeers answers GET /api/peers for a caller who sees every peer:
// from the cached list when the account's serial and view revision are
// those it was encoded at, with the connection state read fresh.
func (a *API) listAllPeers(w http.ResponseWriter, r *http.Request, acc account.ID) error {
	ctx := r.Context()
	now := time.Now()
	var (
		l *peerList
		// states[i] is the connection state of l.peers[i]; live[i] says
		// it is still there.
		states []store.PeerState
		live   []bool
		counts map[account.PeerID]int
	)
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		// The key first: whatever is read after it is at least as new.
		_, rev, err := at.ViewRevision(ctx)
		if err != nil {
			return err
		}
		cur, err := at.Account(ctx)
		if err != nil {
			return err
		}
		if hit, ok := a.peerLists.get(cur, rev); ok {
			l = hit
			ss, err := at.PeerStates(ctx)
			if err != nil {
				return err
			}
			states, live = make([]store.PeerState, len(l.peers)), make([]bool, len(l.peers))
			for _, s := range ss {
				if i, ok := l.index[s.ID]; ok {
					states[i], live[i] = s, true
				}
			}
			counts, err = a.reachCounts(ctx, at, reachSource{acc: cur}, now)
			return err
		}
		v := peerView{acc: cur}
		if v.groups, err = at.Groups(ctx); err != nil {
			return err
		}
		if v.peers, err = at.Peers(ctx); err != nil {
			return err
		}
		v.ids = make([]account.PeerID, len(v.peers))
		states, live = make([]store.PeerState, len(v.peers)), make([]bool, len(v.peers))
		for i, p := range v.peers {
			v.ids[i] = p.ID
			states[i], live[i] = store.PeerState{ID: p.ID, Connected: p.Connected, LastSeen: p.LastSeen}, true
		}
		v.index()
		l = encodePeerList(v, rev, now)
		a.peerLists.put(l)
		counts, err = a.reachCounts(ctx, at, reachSource{acc: cur, groups: v.groups, haveGroups: true, peers: v.peers}, now)
		return err
	})
	if err != nil {
		return err
	}
	name, ip := r.URL.Query().Get("name"), r.URL.Query().Get("ip")
	// Written in chunks: no 10 MB answer is held twice.
	w.Header().Set("Content-Type", "application/json; charset=UTF-8")
	w.WriteHeader(http.StatusOK)
	b := make([]byte, 0, writeChunk+4096)
	b = append(b, '[')
	first := true
	for i := range l.peers {
		lp := &l.peers[i]
		if !live[i] || (name != "" && lp.p.Name != name) || (ip != "" && lp.ip != ip) {
			// Deleted since the list was encoded (a newer revision is
			// on its way), or filtered out.
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = l.appendPeer(b, i, states[i], now, counts[lp.p.ID])
		if len(b) >= writeChunk {
			if _, err := w.Write(b); err != nil {
				return nil // the client left; the status is sent
			}
			b = b[:0]
		}
	}
	b = append(b, ']', '\n')
	_, _ = w.Write(b)
	return nil
}

// writeChunk is how much of a long answer is written at once.
const writeChunk = 64 << 10

// cachedPeer answers GET /api/peers/{id} for a caller who sees every
// peer from the cached list, with the peer's connection state read
// fresh; served is false when the account's list is not cached at its current
// serial and view revision.
func (a *API) cachedPeer(w http.ResponseWriter, r *http.Request, acc account.ID, id account.PeerID) (served bool, err error) {
	ctx := r.Context()
	var (
		l *peerList
		s store.PeerState
	)
	err = a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		_, rev, err := at.ViewRevision(ctx)
		if err != nil {
			return err
		}
		cur, err := at.Account(ctx)
		if err != nil {
			return err
		}
		if l, served = a.peerLists.get(cur, rev); !served {
			return nil
		}
		p, err := at.Peer(ctx, id)
		if errors.Is(err, store.ErrNotFound) {
			return users.ErrNotFound
		}
		s = store.PeerState{ID: p.ID, Connected: p.Connected, LastSeen: p.LastSeen}
		return err
	})
	if err != nil || !served {
		return false, err
	}
	i, listed := l.index[id]
	if !listed {
		// Added after the revision read: not cached.
		return false, nil
	}
	return true, writeRaw(w, append(l.appendPeer(nil, i, s, time.Now(), -1), '\n'))
}
