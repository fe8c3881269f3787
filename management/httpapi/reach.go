package httpapi

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/store"
)

// reachIndex prepares the account's network maps as the peers receive
// them now: over the peers taking part (not blocked users', not expired
// ones) under the current groups, policies and posture checks.
func (a *API) reachIndex(ctx context.Context, acc account.ID) (*networkmap.Index, error) {
	var ix *networkmap.Index
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		a, ps, access, err := networkmap.Read(ctx, tx.In(acc), time.Now())
		if err != nil {
			return err
		}
		ix = networkmap.NewIndex(a, ps, access)
		return nil
	})
	return ix, err
}

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
