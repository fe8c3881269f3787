package users

import (
	"context"
	"errors"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/v6addr"
)

// propagateGroups applies a change of a user's auto groups (group IDs,
// from old to want) to the peers the user added, as the account's groups
// propagation asks: they leave the groups the user lost and join those it
// gained. It reports whether any group changed.
func propagateGroups(ctx context.Context, at *store.AccountTx, user account.UserID, old, want []string) (bool, error) {
	peers, err := at.UserPeers(ctx, user)
	if err != nil || len(peers) == 0 {
		return false, err
	}
	mine := func(id account.PeerID) bool {
		return slices.ContainsFunc(peers, func(p account.Peer) bool { return p.ID == id })
	}
	var changed []account.GroupID
	seen := map[string]bool{}
	for _, gid := range append(slices.Clone(old), want...) {
		if seen[gid] {
			continue
		}
		seen[gid] = true
		g, err := at.Group(ctx, account.GroupID(gid))
		if errors.Is(err, store.ErrNotFound) {
			continue
		}
		if err != nil {
			return false, err
		}
		if g.All {
			continue // every peer is in it already
		}
		keep := slices.Contains(want, gid)
		members := g.Peers[:0:0]
		for _, m := range g.Peers {
			if keep || !mine(m) {
				members = append(members, m)
			}
		}
		if keep {
			for _, p := range peers {
				if !slices.Contains(members, p.ID) {
					members = append(members, p.ID)
				}
			}
		}
		if !slices.Equal(members, g.Peers) {
			g.Peers = members
			if err := at.PutGroup(ctx, g); err != nil {
				return false, err
			}
			changed = append(changed, g.ID)
		}
	}
	// Peers that joined or left an IPv6-enabled group gain or lose their
	// IPv6 overlay address.
	if _, err := v6addr.GroupsChanged(ctx, at, changed...); err != nil {
		return false, err
	}
	return len(changed) > 0, nil
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
