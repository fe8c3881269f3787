package store

import (
	"context"

	"github.com/wiremesh/wiremesh/management/account"
)

// EventSpan reports how many events the account's activity log holds and
// its newest sequence number. The log is append-only with dense sequence
// numbers from 1, so while count equals newest, events 1..newest are all
// there and none changed: readers may keep what they read of it.
func (a *AccountTx) EventSpan(ctx context.Context) (count, newest int64, err error) {
	err = a.q().queryRow(ctx, `SELECT COUNT(*), COALESCE(MAX(seq), 0) FROM events WHERE account_id = ?`, string(a.id)).Scan(&count, &newest)
	return count, newest, mapErr(err)
}

// EventsAfter lists the account's events with a sequence number above seq
// and at most upTo, oldest first.
func (a *AccountTx) EventsAfter(ctx context.Context, seq, upTo int64) ([]account.Event, error) {
	return queryAll(ctx, a.q(), scanEvent, `SELECT account_id, seq, at, activity, initiator, target, meta FROM events WHERE account_id = ? AND seq > ? AND seq <= ? ORDER BY seq`, string(a.id), seq, upTo)
}
