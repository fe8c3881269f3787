package store

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

// This file holds what ends access before a token expires: subjects whose
// earlier tokens are void (deleted or blocked users), access tokens the
// built-in identity provider revoked, and e-mail domains an account
// claimed. Lookups cross accounts, for authentication.

// RevokeSubject voids every token issued to subject up to at; a later call
// moves the mark forward.
func (tx *Tx) RevokeSubject(ctx context.Context, subject account.UserID, at time.Time) error {
	_, err := tx.q.exec(ctx, `INSERT INTO revoked_subjects (subject, revoked_at) VALUES (?, ?)
		ON CONFLICT (subject) DO UPDATE SET revoked_at = excluded.revoked_at`, string(subject), nanos(at))
	return mapErr(err)
}

// SubjectRevokedAt is when subject's tokens were last voided; ErrNotFound
// when never.
func (tx *Tx) SubjectRevokedAt(ctx context.Context, subject account.UserID) (time.Time, error) {
	var at int64
	if err := tx.q.queryRow(ctx, `SELECT revoked_at FROM revoked_subjects WHERE subject = ?`, string(subject)).Scan(&at); err != nil {
		return time.Time{}, mapErr(err)
	}
	return fromNanos(at), nil
}

// RevokeAccessToken records that the access token jti of subject is void
// until it expires; rows of tokens expired by now are dropped.
func (tx *Tx) RevokeAccessToken(ctx context.Context, jti, subject string, expires, now time.Time) error {
	if _, err := tx.q.exec(ctx, `DELETE FROM revoked_tokens WHERE expires_at < ?`, nanos(now)); err != nil {
		return mapErr(err)
	}
	_, err := tx.q.exec(ctx, `INSERT INTO revoked_tokens (jti, subject, expires_at) VALUES (?, ?, ?) ON CONFLICT (jti) DO NOTHING`,
		jti, subject, nanos(expires))
	return mapErr(err)
}

// AccessTokenRevoked reports whether the access token jti was revoked.
func (tx *Tx) AccessTokenRevoked(ctx context.Context, jti string) (bool, error) {
	var n int
	if err := tx.q.queryRow(ctx, `SELECT COUNT(*) FROM revoked_tokens WHERE jti = ?`, jti).Scan(&n); err != nil {
		return false, mapErr(err)
	}
	return n > 0, nil
}

// DeleteInvitesBy removes the invitations a user created and reports how
// many there were.
func (a *AccountTx) DeleteInvitesBy(ctx context.Context, user account.UserID) (int64, error) {
	n, err := a.q().exec(ctx, `DELETE FROM invites WHERE account_id = ? AND created_by = ?`, string(a.id), string(user))
	return n, mapErr(err)
}

// DeleteTokensOf removes every personal access token of a user.
func (a *AccountTx) DeleteTokensOf(ctx context.Context, user account.UserID) error {
	_, err := a.q().exec(ctx, `DELETE FROM personal_access_tokens WHERE account_id = ? AND user_id = ?`, string(a.id), string(user))
	return mapErr(err)
}

// AccountByClaimedDomain finds the account that claimed an e-mail domain.
func (tx *Tx) AccountByClaimedDomain(ctx context.Context, domain string) (account.ID, error) {
	var id string
	err := tx.q.queryRow(ctx, `SELECT id FROM accounts WHERE user_domain = ? AND user_domain_claimed AND user_domain <> ''`, domain).Scan(&id)
	return account.ID(id), mapErr(err)
}

// ClaimedDomain is the e-mail domain the account claimed ("" if none).
func (a *AccountTx) ClaimedDomain(ctx context.Context) (string, error) {
	var d string
	var claimed bool
	if err := a.q().queryRow(ctx, `SELECT user_domain, user_domain_claimed FROM accounts WHERE id = ?`, string(a.id)).Scan(&d, &claimed); err != nil {
		return "", mapErr(err)
	}
	if !claimed {
		return "", nil
	}
	return d, nil
}

// ClaimDomain makes domain the account's claimed e-mail domain ("" drops
// the claim); a domain another account claimed is ErrConflict.
func (a *AccountTx) ClaimDomain(ctx context.Context, domain string) error {
	n, err := a.q().exec(ctx, `UPDATE accounts SET user_domain = ?, user_domain_claimed = ? WHERE id = ?`, domain, domain != "", string(a.id))
	return affected(n, err)
}
