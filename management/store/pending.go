package store

import (
	"context"
	"time"
)

// This file counts users waiting for approval, for the caps on new
// upstream identity-provider users (package users).

// PendingUserCount is how many of the account's users wait for approval.
func (a *AccountTx) PendingUserCount(ctx context.Context) (int, error) {
	var n int
	err := a.q().queryRow(ctx, `SELECT COUNT(*) FROM users WHERE account_id = ? AND pending_approval`, string(a.id)).Scan(&n)
	return n, mapErr(err)
}

// PendingUpstreamJoins is how many users waiting for approval first
// logged in with the upstream provider since the given time.
func (tx *Tx) PendingUpstreamJoins(ctx context.Context, providerID string, since time.Time) (int, error) {
	var n int
	err := tx.q.queryRow(ctx, `SELECT COUNT(*) FROM users u JOIN idp_links l ON l.user_id = u.id
		WHERE l.provider_id = ? AND u.pending_approval AND u.created_at >= ?`, providerID, nanos(since)).Scan(&n)
	return n, mapErr(err)
}
