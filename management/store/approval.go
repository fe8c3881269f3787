package store

import (
	"context"

	"github.com/wiremesh/wiremesh/management/account"
)

// SetPeerApproval marks one of the account's peers pending (required) or
// approved.
func (a *AccountTx) SetPeerApproval(ctx context.Context, id account.PeerID, required bool) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `UPDATE peers SET approval_required = ? WHERE id = ? AND account_id = ?`, required, string(id), string(a.id))
	return affected(n, err)
}

// ApprovePendingPeers approves every pending peer of the account and
// returns them as they were (still marked pending), oldest first.
func (a *AccountTx) ApprovePendingPeers(ctx context.Context) ([]account.Peer, error) {
	ps, err := queryAll(ctx, a.q(), scanPeer, `SELECT `+peerCols+` FROM peers WHERE account_id = ? AND approval_required ORDER BY created_at, id`, string(a.id))
	if err != nil || len(ps) == 0 {
		return ps, err
	}
	if err := a.bumpView(ctx); err != nil {
		return nil, err
	}
	if _, err := a.q().exec(ctx, `UPDATE peers SET approval_required = FALSE WHERE account_id = ? AND approval_required`, string(a.id)); err != nil {
		return nil, mapErr(err)
	}
	return ps, nil
}
