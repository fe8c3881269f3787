package store

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

// The view revision: a per-account counter every change to what the
// REST API shows of peers, groups and policies bumps, besides the network
// serial
// (a peer's metadata or login time changes no network map, so no
// serial). The writes below bump it themselves, before they touch the
// peer or group rows (accounts row first, as Lock takes it); connection
// state (SetPeerConnected, MarkAllDisconnected) does not bump it: readers
// overlay it from PeerStates.

// bumpView increments the account's view revision.
func (a *AccountTx) bumpView(ctx context.Context) error {
	_, err := a.q().exec(ctx, `UPDATE accounts SET view_rev = view_rev + 1 WHERE id = ?`, string(a.id))
	return mapErr(err)
}

// ViewRevision reads the account's network serial and view revision
// together: cached views of its peers stay valid while both are.
func (a *AccountTx) ViewRevision(ctx context.Context) (serial, rev uint64, err error) {
	var s, r int64
	if err := a.q().queryRow(ctx, `SELECT serial, view_rev FROM accounts WHERE id = ?`, string(a.id)).Scan(&s, &r); err != nil {
		return 0, 0, mapErr(err)
	}
	return uint64(s), uint64(r), nil
}

// PeerState is a peer's connection state, which changes without a new
// serial or view revision.
type PeerState struct {
	ID        account.PeerID
	Connected bool
	LastSeen  time.Time
}

// PeerStates lists the connection state of the account's peers, in no
// particular order.
func (a *AccountTx) PeerStates(ctx context.Context) ([]PeerState, error) {
	return queryAll(ctx, a.q(), func(sc scanner) (PeerState, error) {
		var (
			s    PeerState
			id   string
			seen int64
		)
		if err := sc.Scan(&id, &s.Connected, &seen); err != nil {
			return s, mapErr(err)
		}
		s.ID, s.LastSeen = account.PeerID(id), fromNanos(seen)
		return s, nil
	}, `SELECT id, connected, last_seen FROM peers WHERE account_id = ?`, string(a.id))
}
