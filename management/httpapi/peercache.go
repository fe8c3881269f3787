package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/peerconns"
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
	// counts is the last reach entry's accessible_peers_count of each
	// peer, by position (countsIn).
	counts atomic.Pointer[listCounts]
	// scratch holds *listScratch sized for this list, reused by its
	// answers.
	scratch sync.Pool
}

// listScratch is one answer's working memory: the states read, the
// connection reports and the chunk being written. At 10,000 peers that
// is about 0.8 MB; allocated afresh by every answer (with the ID strings
// of the state read, 1.7 MB an answer in all) it brought a GC cycle every
// twenty-odd answers, and an answer sharing the machine's two cores with
// one is among the slowest. Reused (and the states read without IDs), an
// answer leaves the GC about 110 KB, the database driver's per row.
type listScratch struct {
	ps       peerStates
	conns    []peerconns.Counts
	hasConns []bool
	chunk    []byte
}

// getScratch returns working memory for one answer of l, to be given
// back with putScratch once nothing (the state reader included) uses it.
func (l *peerList) getScratch() *listScratch {
	n := len(l.peers)
	s, _ := l.scratch.Get().(*listScratch)
	if s == nil {
		s = &listScratch{conns: make([]peerconns.Counts, n), hasConns: make([]bool, n), chunk: make([]byte, 0, writeChunk+4096)}
	}
	s.ps.reset(n)
	return s
}

func (l *peerList) putScratch(s *listScratch) { l.scratch.Put(s) }

// listCounts are one reach entry's counts in a list's order; the entry's
// prepared maps (a new Index each time counts are computed) identify it.
type listCounts struct {
	ix *networkmap.Index
	of []int32
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
func (l *peerList) appendPeer(b []byte, i int, s store.PeerState, now time.Time, count int, cs *connCounts, list []peerConnJSON) []byte {
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
	return append(appendConns(b, cs, list), '}')
}

// place finds id's position in the list for a read that lists the peers
// in the list's order (store.AccountTx.EachPeerState): the position after
// the last one found (*next) is tried before the index, and a peer the
// list does not hold (added since it was encoded) is not found.
func (l *peerList) place(next *int, id account.PeerID) (int, bool) {
	i := *next
	if i >= len(l.peers) || l.peers[i].p.ID != id {
		var ok bool
		if i, ok = l.index[id]; !ok {
			return 0, false
		}
	}
	*next = i + 1
	return i, true
}

// countsIn returns e's count of each of l's peers, by position: worked
// out once per reach entry rather than looked up by ID for every peer of
// every answer.
func (l *peerList) countsIn(e reachEntry) []int32 {
	if c := l.counts.Load(); c != nil && c.ix == e.ix {
		return c.of
	}
	c := &listCounts{ix: e.ix, of: make([]int32, len(l.peers))}
	for i := range l.peers {
		c.of[i] = int32(e.counts[l.peers[i].p.ID])
	}
	l.counts.Store(c)
	return c.of
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
		l     *peerList
		reach reachEntry
		// fresh holds the states when the list was just encoded (from
		// the same read); nil on a hit, whose states are streamed.
		fresh *peerStates
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
			reach, err = a.reachAt(ctx, at, reachSource{acc: cur}, now)
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
		fresh = newPeerStates(len(v.peers))
		for i, p := range v.peers {
			v.ids[i] = p.ID
			fresh.states[i], fresh.live[i] = store.PeerState{ID: p.ID, Connected: p.Connected, LastSeen: p.LastSeen}, true
		}
		fresh.done(len(v.peers), nil)
		v.index()
		l = encodePeerList(v, rev, now)
		a.peerLists.put(l)
		reach, err = a.reachAt(ctx, at, reachSource{acc: cur, groups: v.groups, haveGroups: true, peers: v.peers}, now)
		return err
	})
	if err != nil {
		return err
	}
	sc := l.getScratch()
	lw := listWriter{w: w, l: l, counts: l.countsIn(reach), now: now, name: r.URL.Query().Get("name"), ip: r.URL.Query().Get("ip"),
		conns: sc.conns, hasConns: sc.hasConns, chunk: sc.chunk}
	// Connection reports are live: read for every answer, like states.
	a.o.Conns.CountsOf(acc, func(i int) account.PeerID { return l.peers[i].p.ID }, len(l.peers), lw.conns, lw.hasConns)
	if fresh != nil {
		err := lw.write(fresh)
		l.putScratch(sc)
		return err
	}
	// The states are read (most of a cached answer's work) while the
	// answer is written: the peers whose states are in go out as the rest
	// are read. The read never waits for the client, so a slow one holds
	// no database connection.
	ctx, cancel := context.WithCancel(ctx)
	ps := &sc.ps
	read := make(chan struct{})
	go func() {
		defer close(read)
		ps.done(ps.read(ctx, a.o.Store, acc, l, true))
	}()
	err = lw.write(ps)
	cancel()
	<-read
	if errors.Is(err, errStatesDisordered) && !lw.sent {
		// Not in the list's order (never expected: both are read with
		// one ORDER BY): read them all first.
		ps.reset(len(l.peers))
		ps.done(ps.read(r.Context(), a.o.Store, acc, l, false))
		err = lw.write(ps)
		l.putScratch(sc)
		return err
	}
	if err != nil && lw.sent {
		// Part of the answer went out with status 200: cut it off so the
		// client sees a broken answer, not a short list.
		a.o.Log.WarnContext(r.Context(), "REST peer list cut off", "account", acc, "err", err)
		panic(http.ErrAbortHandler)
	}
	// The reader is done (<-read) and the writer returned: nothing holds
	// the scratch.
	l.putScratch(sc)
	return err
}

// errStatesDisordered: the connection states did not come in the list's
// order, so a streamed answer cannot place them.
var errStatesDisordered = errors.New("peer states out of the list's order")

// peerStates are the connection states of a cached list's peers, filled
// in list order by one goroutine while another writes the peers whose
// states are in.
type peerStates struct {
	// states[i] is the state of the list's i-th peer, live[i] says the
	// peer is still there: both final for i < in.
	states []store.PeerState
	live   []bool
	in     atomic.Int64
	mu     sync.Mutex
	more   chan struct{} // closed and replaced when in moves
	err    error         // why the read ended early; set once in is final
	end    bool
}

func newPeerStates(n int) *peerStates {
	ps := &peerStates{}
	ps.reset(n)
	return ps
}

// reset readies ps for a read of n states, reusing its memory: no peer
// is live and none is final.
func (ps *peerStates) reset(n int) {
	if cap(ps.states) < n {
		ps.states, ps.live = make([]store.PeerState, n), make([]bool, n)
	}
	ps.states, ps.live = ps.states[:n], ps.live[:n]
	clear(ps.live)
	ps.in.Store(0)
	ps.more, ps.err, ps.end = make(chan struct{}), nil, false
}

// read reads the states of l's peers into ps and returns how many
// positions are final and why it stopped early. Streamed, it publishes
// its progress every 64 peers (about a chunk of the answer) and needs
// the states in the list's order; otherwise it takes them in any order.
// Streamed, it first reads them by position while the account's view
// revision is still the list's (no IDs: the cheaper read, and the usual
// case), and with their IDs when it is not.
func (ps *peerStates) read(ctx context.Context, st *store.Store, acc account.ID, l *peerList, streamed bool) (int, error) {
	if streamed && len(l.peers) > 0 {
		var n int
		err := st.Read(ctx, func(tx *store.Tx) error {
			var err error
			n, err = tx.In(acc).EachPeerStateAt(ctx, l.rev, func(i int, connected bool, seen time.Time) error {
				if i >= len(l.peers) {
					return errStatesDisordered
				}
				ps.states[i], ps.live[i] = store.PeerState{ID: l.peers[i].p.ID, Connected: connected, LastSeen: seen}, true
				if (i+1)%64 == 0 {
					ps.publish(int64(i + 1))
				}
				return nil
			})
			return err
		})
		switch {
		case err != nil:
			return int(ps.in.Load()), err
		case n == len(l.peers):
			return n, nil
		case n > 0:
			// At the list's revision but not its peers: never expected
			// (every insert and delete bumps the revision).
			return int(ps.in.Load()), errStatesDisordered
		}
		// The revision has moved on (nothing was published): by ID.
	}
	next := 0
	err := st.Read(ctx, func(tx *store.Tx) error {
		return tx.In(acc).EachPeerState(ctx, func(s store.PeerState) error {
			i, ok := l.place(&next, s.ID)
			if !ok {
				return nil // added since the list was encoded
			}
			if streamed && int64(i) < ps.in.Load() {
				// Its place may be written already.
				return errStatesDisordered
			}
			ps.states[i], ps.live[i] = s, true
			if streamed && next%64 == 0 {
				ps.publish(int64(next))
			}
			return nil
		})
	})
	if err != nil {
		return int(ps.in.Load()), err
	}
	return len(l.peers), nil
}

// publish makes positions below in final.
func (ps *peerStates) publish(in int64) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if in > ps.in.Load() {
		ps.in.Store(in)
		close(ps.more)
		ps.more = make(chan struct{})
	}
}

// done ends the read: positions below in are final, err says why the
// rest are not.
func (ps *peerStates) done(in int, err error) {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if int64(in) > ps.in.Load() {
		ps.in.Store(int64(in))
	}
	ps.err, ps.end = err, true
	close(ps.more)
}

// wait blocks until position i is final, or returns why it never will be.
func (ps *peerStates) wait(i int) error {
	for {
		if int64(i) < ps.in.Load() {
			return nil
		}
		ps.mu.Lock()
		if int64(i) < ps.in.Load() {
			ps.mu.Unlock()
			return nil
		}
		if ps.end {
			err := ps.err
			ps.mu.Unlock()
			if err == nil {
				err = fmt.Errorf("peer state %d never read", i)
			}
			return err
		}
		more := ps.more
		ps.mu.Unlock()
		<-more
	}
}

// listWriter writes a cached list with its peers' connection states,
// counts of accessible peers and login expiry at now, in chunks: no 10 MB
// answer is held twice. The status goes out with the first chunk, so an
// error before it still gets its own answer.
type listWriter struct {
	w        http.ResponseWriter
	l        *peerList
	counts   []int32
	now      time.Time
	name, ip string // the filters
	sent     bool   // the status and part of the answer are out
	// conns[i] is the i-th peer's connection report, when hasConns[i].
	conns    []peerconns.Counts
	hasConns []bool
	chunk    []byte // reused for the chunks when not nil
}

func (lw *listWriter) write(ps *peerStates) error {
	l := lw.l
	b := lw.chunk[:0]
	if cap(b) == 0 {
		b = make([]byte, 0, writeChunk+4096)
	}
	b = append(b, '[')
	first := true
	for i := range l.peers {
		if err := ps.wait(i); err != nil {
			return err
		}
		lp := &l.peers[i]
		if !ps.live[i] || (lw.name != "" && lp.p.Name != lw.name) || (lw.ip != "" && lp.ip != lw.ip && ipv6Text(lp.p.IPv6) != lw.ip) {
			// Deleted since the list was encoded (a newer revision is
			// on its way), or filtered out.
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		var cs *connCounts
		if i < len(lw.hasConns) && lw.hasConns[i] {
			c := lw.conns[i] // no allocation per peer
			cs = &connCounts{P2P: c.P2P, Relayed: c.Relayed, Connecting: c.Connecting}
		}
		b = l.appendPeer(b, i, ps.states[i], lw.now, int(lw.counts[i]), cs, nil)
		if len(b) >= writeChunk {
			if !lw.flush(b) {
				return nil // the client left; the status is sent
			}
			b = b[:0]
		}
	}
	lw.flush(append(b, ']', '\n'))
	return nil
}

// flush writes b (the status first, once), reporting whether the client
// still reads.
func (lw *listWriter) flush(b []byte) bool {
	if !lw.sent {
		lw.w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		lw.w.WriteHeader(http.StatusOK)
		lw.sent = true
	}
	_, err := lw.w.Write(b)
	return err == nil
}

// writeChunk is how much of a long answer is written at once.
//
// The answer is not gzipped, whatever Accept-Encoding says: at 10,000
// peers (10 MB) gzip's fastest level takes 13.6 ms of CPU to compress
// and the client 9 ms to inflate, against about 3 ms to write it
// uncompressed over a fast link, so it would lengthen every answer on the
// two-core machine the benchmark runs on (bench/restapi). A reverse proxy
// in front can still compress for slow links.
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
	cs, list := a.connsOf(acc, id, true)
	return true, writeRaw(w, append(l.appendPeer(nil, i, s, time.Now(), -1, cs, list), '\n'))
}
