package grpcapi

import (
	"sync"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Network map deltas (a wiremesh extension our agent asks for): when an
// account changes only in a few peers, a stream sends what its map gains
// and loses about those peers instead of the whole map, so a join costs
// every other stream a message whose size does not grow with the account.
// The account-level difference is computed once per pair of states and
// shared by the account's streams.

type diffKey struct{ old, cur *networkmap.Index }

type diffResult struct {
	once    sync.Once
	changes []networkmap.Change
	ok      bool
}

// step is how one account state led to the next: the peers that changed,
// or ok=false for a broader change.
type step struct {
	from, to uint64 // serials
	ids      []account.PeerID
	ok       bool
}

// maxSteps bounds the history kept per account; a stream further behind
// gets a whole map.
const maxSteps = 256

// chain returns the peers changed from serial from to serial to, if every
// step in between was peer-local and is still known.
func chain(steps []step, from, to uint64) ([]account.PeerID, bool) {
	i := 0
	for i < len(steps) && steps[i].from != from {
		i++
	}
	seen := map[account.PeerID]bool{}
	var ids []account.PeerID
	for at := from; at != to; i++ {
		if i >= len(steps) || steps[i].from != at || !steps[i].ok {
			return nil, false
		}
		for _, id := range steps[i].ids {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
		at = steps[i].to
	}
	return ids, true
}

// diffs caches the difference per pair of account states.
type diffs struct {
	mu sync.Mutex
	m  map[diffKey]*diffResult
}

func (d *diffs) get(old, cur *networkmap.Index, compute func() ([]networkmap.Change, bool)) ([]networkmap.Change, bool) {
	k := diffKey{old, cur}
	d.mu.Lock()
	if d.m == nil {
		d.m = map[diffKey]*diffResult{}
	}
	r := d.m[k]
	if r == nil {
		// Pairs ending in an older state are done with: streams move on to
		// the newest one.
		for k2 := range d.m {
			if k2.cur != cur {
				delete(d.m, k2)
			}
		}
		r = &diffResult{}
		d.m[k] = r
	}
	d.mu.Unlock()
	r.once.Do(func() { r.changes, r.ok = compute() })
	return r.changes, r.ok
}

// delta is self's map delta from state old to cur (nil: its map did not
// change); ok=false when it needs a whole map instead.
func (s *Server) delta(acc account.ID, self account.PeerID, old, cur *networkmap.Index, remote remoteCache) (*mgmtpb.NetworkMapDelta, bool) {
	changes, ok := s.snaps.diff(acc, old, cur)
	if !ok {
		return nil, false
	}
	return mapDelta(old, cur, remote, self, changes)
}

// mapDelta is self's map delta from old to cur given their peer-local
// changes (nil: self's map did not change). ok=false means self itself
// changed, so its whole map is needed.
func mapDelta(old, cur *networkmap.Index, remote remoteCache, self account.PeerID, changes []networkmap.Change) (d *mgmtpb.NetworkMapDelta, ok bool) {
	d = &mgmtpb.NetworkMapDelta{}
	for _, c := range changes {
		if c.ID == self {
			return nil, false
		}
	}
	// A delta carries no routes: when self's routes change (a routing peer's new
	// key, a new source for a resource it routes) the whole map goes.
	if !networkmap.SameRoutes(old, cur, self) {
		return nil, false
	}
	for _, c := range changes {
		oldVis, oldRules := old.Pair(self, c.ID)
		newVis, newRules := cur.Pair(self, c.ID)
		switch {
		case oldVis && !newVis:
			d.RemovedPeers = append(d.RemovedPeers, c.Old.Key.String())
		case newVis && (!oldVis || c.Shown):
			if oldVis && c.Old.Key != c.New.Key {
				d.RemovedPeers = append(d.RemovedPeers, c.Old.Key.String())
			}
			sh, ok := remote[c.ID]
			if !ok { // not cached with the state: build it
				sh = newShown(c.New, cur.Domain(), cur.IsV6(c.ID))
			}
			rp, _ := sh.peer(cur.IsV6(self) && cur.IsV6(c.ID))
			d.UpsertPeers = append(d.UpsertPeers, rp)
		}
		add, remove := ruleDiff(firewallRules(oldRules), firewallRules(newRules))
		d.AddRules = append(d.AddRules, add...)
		d.RemoveRules = append(d.RemoveRules, remove...)
	}
	if len(d.UpsertPeers)+len(d.RemovedPeers)+len(d.AddRules)+len(d.RemoveRules) == 0 {
		return nil, true
	}
	return d, true
}

// ruleDiff returns the rules of b not in a and those of a not in b, as
// multisets.
func ruleDiff(a, b []*mgmtpb.FirewallRule) (add, remove []*mgmtpb.FirewallRule) {
	left := append([]*mgmtpb.FirewallRule(nil), a...)
	for _, r := range b {
		found := false
		for i, l := range left {
			if l != nil && proto.Equal(l, r) {
				left[i], found = nil, true
				break
			}
		}
		if !found {
			add = append(add, r)
		}
	}
	for _, l := range left {
		if l != nil {
			remove = append(remove, l)
		}
	}
	return add, remove
}
