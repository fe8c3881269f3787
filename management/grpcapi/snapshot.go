package grpcapi

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/store"
)

// snapshots shares one loaded account state among all streams of the
// account: after a change, the first stream to look loads it (peers,
// groups, policies, prepared as a networkmap.Index) and the others reuse
// it, so a change costs one load per account instead of one per peer.
type snapshots struct {
	mu    sync.Mutex
	byAcc map[account.ID]*snapEntry
}

type snapEntry struct {
	mu     sync.Mutex // one load at a time
	serial uint64
	ix     *networkmap.Index // nil: account gone
	remote remoteCache
	loaded bool
	diffs  diffs  // between states, for map deltas
	steps  []step // how each loaded state led to the next, oldest first
	// checked is when the last read of the account's serial began: the
	// state is current for every change committed before then.
	checked   time.Time
	keysIndex // the peers by key, for connection reports (conns.go)
}

func (c *snapshots) entry(acc account.ID) *snapEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.byAcc == nil {
		c.byAcc = map[account.ID]*snapEntry{}
	}
	e := c.byAcc[acc]
	if e == nil {
		e = &snapEntry{}
		c.byAcc[acc] = e
	}
	return e
}

// lookup returns the account's entry if one exists; unlike entry it
// never creates one, for callers that must not keep state of an account
// no stream holds (connection reports).
func (c *snapshots) lookup(acc account.ID) *snapEntry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.byAcc[acc]
}

// forget drops an account's state (its last stream closed).
func (c *snapshots) forget(acc account.ID) {
	c.mu.Lock()
	delete(c.byAcc, acc)
	c.mu.Unlock()
}

// index returns the account's state at least as new as its serial now,
// with its peers' RemotePeerConfig messages. A stream woken by a change
// made at since (zero: unknown) reuses a state another stream checked
// after that moment, so one change costs one read of the serial, not one
// per stream.
func (c *snapshots) index(ctx context.Context, st *store.Store, acc account.ID, since time.Time) (*networkmap.Index, remoteCache, error) {
	if !since.IsZero() {
		e := c.entry(acc)
		e.mu.Lock()
		if e.loaded && e.checked.After(since) {
			ix, remote := e.ix, e.remote
			e.mu.Unlock()
			return ix, remote, nil
		}
		e.mu.Unlock()
	}
	started := time.Now()
	var serial uint64
	gone := false
	err := st.Read(ctx, func(tx *store.Tx) error {
		a, err := tx.In(acc).Account(ctx)
		if errors.Is(err, store.ErrNotFound) {
			gone = true
			return nil
		}
		serial = a.Serial
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	if gone {
		return nil, nil, nil
	}
	e := c.entry(acc)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.loaded && e.serial >= serial {
		if started.After(e.checked) {
			e.checked = started
		}
		return e.ix, e.remote, nil
	}
	var (
		a      account.Account
		ps     []account.Peer
		access networkmap.Access
	)
	err = st.Read(ctx, func(tx *store.Tx) error {
		var err error
		a, ps, access, err = networkmap.Read(ctx, tx.In(acc), time.Now())
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	ix := networkmap.NewIndex(a, ps, access)
	remote := make(remoteCache, len(ps))
	for i := range ps {
		// A peer shown as before keeps its message: less to allocate per
		// state, and streams still pointing at older states share them.
		id := ps[i].ID
		if old, ok := e.ix.Peer(id); ok && e.ix.Domain() == a.Domain && sameShown(&old, &ps[i]) && e.ix.IsV6(id) == ix.IsV6(id) {
			if sh, ok := e.remote[id]; ok {
				remote[id] = sh
				continue
			}
		}
		remote[id] = newShown(&ps[i], a.Domain, ix.IsV6(id))
	}
	prev := e.ix
	e.serial, e.ix, e.remote, e.loaded = a.Serial, ix, remote, true
	if prev != nil {
		// Once per state, for every stream's deltas: which peers changed.
		changes, ok := networkmap.PeerLocal(prev, e.ix)
		st := step{from: prev.Serial(), to: e.ix.Serial(), ok: ok}
		for _, c := range changes {
			st.ids = append(st.ids, c.ID)
		}
		if len(e.steps) == maxSteps {
			e.steps = append(e.steps[:0], e.steps[1:]...)
		}
		e.steps = append(e.steps, st)
	}
	if started.After(e.checked) {
		e.checked = started
	}
	return e.ix, e.remote, nil
}

// loaded returns the serial of the account's loaded state, if any.
func (c *snapshots) loaded(acc account.ID) (uint64, bool) {
	c.mu.Lock()
	e := c.byAcc[acc]
	c.mu.Unlock()
	if e == nil {
		return 0, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.serial, e.loaded
}

// LoadedSerial reports the serial of the account state this instance's
// streams last loaded (false: none loaded), so a change announced by the
// store that they already saw need not wake them again.
func (s *Server) LoadedSerial(acc account.ID) (uint64, bool) { return s.snaps.loaded(acc) }

// diff is how the account changed from state old to cur if only in some
// peers (ok=false otherwise), composed from the recorded steps in between
// once per pair for all of the account's streams.
func (c *snapshots) diff(acc account.ID, old, cur *networkmap.Index) ([]networkmap.Change, bool) {
	e := c.entry(acc)
	return e.diffs.get(old, cur, func() ([]networkmap.Change, bool) {
		e.mu.Lock()
		ids, ok := chain(e.steps, old.Serial(), cur.Serial())
		e.mu.Unlock()
		if !ok {
			return nil, false
		}
		return networkmap.Between(old, cur, ids), true
	})
}

// sameShown reports whether two versions of a peer give the same
// RemotePeerConfig (see remotePeer), their v6-activeness aside.
func sameShown(a, b *account.Peer) bool {
	return a.Key == b.Key && a.IP == b.IP && a.IPv6 == b.IPv6 && a.SSHPubKey == b.SSHPubKey && a.DNSLabel == b.DNSLabel
}
