package httpapi

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/store"
)

// accessibleCount is how many peers id reaches: the length of its
// network map, 0 for a peer that takes no part (pending, expired, its
// user blocked), as GET /api/peers/{peerId}/accessible-peers lists them.
func accessibleCount(ix *networkmap.Index, id account.PeerID) int {
	ps, ok := ix.Reachable(id)
	if !ok {
		return 0
	}
	return len(ps)
}

// Bounds of the reach cache: accounts kept, and peers in all (a peer
// costs about 2 KB: its count and its place in the prepared maps).
const (
	maxReachAccounts = 256
	maxReachPeers    = 200_000
)

// reachCache keeps each account's network maps, prepared (an Index),
// and the accessible_peers_count of every peer, as computed at one
// network serial. Every change that can change a
// network map (peers added, removed, renamed or re-addressed, groups,
// policies, posture checks and the metadata they read, blocked users,
// settings, expiries) bumps the account's serial in the store, so counts
// computed at the serial a request reads are the ones it would compute;
// keyed by the stored serial, the cache is right on any number of
// management instances sharing one database. Expiry is the one input
// that moves with time: an entry serves only until the first login or
// inactivity expiry it did not yet count (the expiry sweeper bumps the
// serial when it announces one).
type reachCache struct {
	b *bounded[account.ID, reachEntry]
}

type reachEntry struct {
	serial uint64
	until  time.Time // zero: no expiry pending
	counts map[account.PeerID]int
	ix     *networkmap.Index // the maps the counts are of
}

func newReachCache() *reachCache {
	return &reachCache{newBounded[account.ID](maxReachAccounts, maxReachPeers, func(e reachEntry) int { return len(e.counts) })}
}

// get returns the entry of acc at serial, if held and still current at
// now.
func (c *reachCache) get(acc account.ID, serial uint64, now time.Time) (reachEntry, bool) {
	e, ok := c.b.get(acc)
	if !ok || e.serial != serial || (!e.until.IsZero() && !now.Before(e.until)) {
		return reachEntry{}, false
	}
	return e, true
}

// put keeps counts, evicting other accounts' entries past the bounds.
func (c *reachCache) put(acc account.ID, e reachEntry) { c.b.put(acc, e, nil) }

// reachSource is what counting reads: the account, its groups and
// (when the caller already read them) all its peers; the rest of the
// network-map state is read only on a miss.
type reachSource struct {
	acc    account.Account
	groups []account.Group // read only when haveGroups
	peers  []account.Peer  // nil: not read yet
	// haveGroups says groups holds the account's groups.
	haveGroups bool
}

// reachCounts returns every peer's accessible_peers_count at the serial
// of src.acc, from the cache or computed from src and at.
func (a *API) reachCounts(ctx context.Context, at *store.AccountTx, src reachSource, now time.Time) (map[account.PeerID]int, error) {
	e, err := a.reachAt(ctx, at, src, now)
	return e.counts, err
}

// reachAt returns the account's maps and counts at the serial of src.acc,
// from the cache or computed from src and at.
func (a *API) reachAt(ctx context.Context, at *store.AccountTx, src reachSource, now time.Time) (reachEntry, error) {
	if e, ok := a.reach.get(src.acc.ID, src.acc.Serial, now); ok {
		return e, nil
	}
	all := src.peers
	if all == nil {
		var err error
		if all, err = at.Peers(ctx); err != nil {
			return reachEntry{}, err
		}
	}
	blocked, err := at.BlockedUsers(ctx)
	if err != nil {
		return reachEntry{}, err
	}
	access := networkmap.Access{Groups: src.groups}
	if !src.haveGroups {
		if access.Groups, err = at.Groups(ctx); err != nil {
			return reachEntry{}, err
		}
	}
	if access.Policies, err = at.Policies(ctx); err != nil {
		return reachEntry{}, err
	}
	if access.PostureChecks, err = at.PostureChecks(ctx); err != nil {
		return reachEntry{}, err
	}
	ps := networkmap.Participants(src.acc, all, blocked, now)
	ix := networkmap.NewIndex(src.acc, ps, access)
	e := reachEntry{serial: src.acc.Serial, counts: make(map[account.PeerID]int, len(ps)), ix: ix}
	for _, p := range ps {
		if n := accessibleCount(ix, p.ID); n > 0 {
			e.counts[p.ID] = n
		}
		for _, exp := range []time.Time{src.acc.Settings.LoginExpiry(p), src.acc.Settings.InactivityExpiry(p)} {
			if !exp.IsZero() && (e.until.IsZero() || exp.Before(e.until)) {
				e.until = exp
			}
		}
	}
	a.reach.put(src.acc.ID, e)
	return e, nil
}
