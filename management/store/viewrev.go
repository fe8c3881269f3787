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

// peerStatesSQL reads the connection states from the peers_state index
// alone (it covers the columns and the order).
const peerStatesSQL = `SELECT id, connected, last_seen FROM peers WHERE account_id = ? ORDER BY created_at, id`

// PeerStates lists the connection state of the account's peers, in the
// order Peers lists them.
func (a *AccountTx) PeerStates(ctx context.Context) ([]PeerState, error) {
	var out []PeerState
	err := a.EachPeerState(ctx, func(s PeerState) error {
		out = append(out, s)
		return nil
	})
	return out, err
}

// EachPeerState calls fn with the connection state of each of the
// account's peers, in the order Peers lists them (a cached list matches
// them up by position), stopping at fn's first error.
// Unlike PeerStates it collects nothing: the REST peer list reads every
// state on each request and keeps none of them.
func (a *AccountTx) EachPeerState(ctx context.Context, fn func(PeerState) error) error {
	rs, err := a.q().query(ctx, peerStatesSQL, string(a.id))
	if err != nil {
		return mapErr(err)
	}
	defer rs.Close()
	// Scanned into the same variables row after row: no allocation per
	// row but the ID's string.
	var (
		id   string
		s    PeerState
		seen int64
	)
	for rs.Next() {
		if err := rs.Scan(&id, &s.Connected, &seen); err != nil {
			return mapErr(err)
		}
		s.ID, s.LastSeen = account.PeerID(id), fromNanos(seen)
		if err := fn(s); err != nil {
			return err
		}
	}
	return mapErr(rs.Err())
}
