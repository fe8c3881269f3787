package store

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

// PasswordLink is a single-use link that sets a user's password at the
// built-in identity provider (an invitation e-mail to a user who has not
// logged in yet). Only the hash of its token is kept; a user has at most
// one.
type PasswordLink struct {
	Subject   account.UserID
	AccountID account.ID
	Hash      string
	ExpiresAt time.Time
	CreatedBy account.UserID
	CreatedAt time.Time
}

const passwordLinkCols = `subject, account_id, token_hash, expires_at, created_by, created_at`

func scanPasswordLink(sc scanner) (PasswordLink, error) {
	var (
		l                PasswordLink
		sub, acc, by     string
		expires, created int64
	)
	if err := sc.Scan(&sub, &acc, &l.Hash, &expires, &by, &created); err != nil {
		return l, mapErr(err)
	}
	l.Subject, l.AccountID, l.CreatedBy = account.UserID(sub), account.ID(acc), account.UserID(by)
	l.ExpiresAt, l.CreatedAt = fromNanos(expires), fromNanos(created)
	return l, nil
}

// PutPasswordLink stores the user's link, replacing the one it had (whose
// token stops working at once).
func (a *AccountTx) PutPasswordLink(ctx context.Context, l PasswordLink) error {
	if err := a.owns("password link", l.AccountID); err != nil {
		return err
	}
	_, err := a.q().exec(ctx, `INSERT INTO password_links (`+passwordLinkCols+`) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (subject) DO UPDATE SET account_id = excluded.account_id, token_hash = excluded.token_hash,
		expires_at = excluded.expires_at, created_by = excluded.created_by, created_at = excluded.created_at`,
		string(l.Subject), string(l.AccountID), l.Hash, nanos(l.ExpiresAt), string(l.CreatedBy), nanos(l.CreatedAt))
	return mapErr(err)
}

// PasswordLinkByHash finds a link by the hash of its token, in whatever
// account: its holder is not logged in.
func (tx *Tx) PasswordLinkByHash(ctx context.Context, hash string) (PasswordLink, error) {
	return scanPasswordLink(tx.q.queryRow(ctx, `SELECT `+passwordLinkCols+` FROM password_links WHERE token_hash = ?`, hash))
}

// PasswordLinkOf finds the user's link.
func (a *AccountTx) PasswordLinkOf(ctx context.Context, user account.UserID) (PasswordLink, error) {
	return scanPasswordLink(a.q().queryRow(ctx, `SELECT `+passwordLinkCols+` FROM password_links WHERE subject = ? AND account_id = ?`,
		string(user), string(a.id)))
}

// DeletePasswordLink removes the user's link; with hash not empty only if
// it is still that one (ErrNotFound otherwise).
func (a *AccountTx) DeletePasswordLink(ctx context.Context, user account.UserID, hash string) error {
	q := `DELETE FROM password_links WHERE subject = ? AND account_id = ?`
	args := []any{string(user), string(a.id)}
	if hash != "" {
		q += ` AND token_hash = ?`
		args = append(args, hash)
	}
	n, err := a.q().exec(ctx, q, args...)
	return affected(n, err)
}
