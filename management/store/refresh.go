package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// This file holds the built-in identity provider's refresh tokens, kept by
// hash and grouped in families (one family per login). Lookups cross
// accounts: the provider authenticates before an account is known.

// RefreshToken is one refresh token as stored. Hash is the SHA-256 of the
// token, hex-encoded; the token itself is never stored.
type RefreshToken struct {
	Hash, Family, Subject, ClientID string
	Scopes, AMR                     []string
	AuthTime, CreatedAt             time.Time
	// ExpiresAt ends this token; FamilyExpiresAt ends every rotation of
	// the login it came from.
	ExpiresAt, FamilyExpiresAt time.Time
	// UsedAt is when the token was rotated (zero: it is the current one).
	UsedAt time.Time
	// AccessJTI is the latest access token issued from the family, which
	// revoking the family revokes too.
	AccessJTI       string
	AccessExpiresAt time.Time
}

const refreshCols = `hash, family, subject, client_id, scopes, amr, auth_time, created_at, expires_at, family_expires_at, used_at, access_jti, access_expires_at`

func scanRefresh(r scanner) (RefreshToken, error) {
	var (
		t                                   RefreshToken
		scopes, amr                         string
		auth, created, exp, fexp, used, aex int64
	)
	if err := r.Scan(&t.Hash, &t.Family, &t.Subject, &t.ClientID, &scopes, &amr, &auth, &created, &exp, &fexp, &used, &t.AccessJTI, &aex); err != nil {
		return t, mapErr(err)
	}
	if err := json.Unmarshal([]byte(scopes), &t.Scopes); err != nil {
		return t, fmt.Errorf("refresh token scopes: %w", err)
	}
	if err := json.Unmarshal([]byte(amr), &t.AMR); err != nil {
		return t, fmt.Errorf("refresh token amr: %w", err)
	}
	t.AuthTime, t.CreatedAt, t.ExpiresAt, t.FamilyExpiresAt = fromNanos(auth), fromNanos(created), fromNanos(exp), fromNanos(fexp)
	t.UsedAt, t.AccessExpiresAt = fromNanos(used), fromNanos(aex)
	return t, nil
}

// InsertRefreshToken stores a refresh token. Families past their end by
// now are dropped first, so the table holds only live logins.
func (tx *Tx) InsertRefreshToken(ctx context.Context, t RefreshToken, now time.Time) error {
	if _, err := tx.q.exec(ctx, `DELETE FROM refresh_tokens WHERE family_expires_at < ?`, nanos(now)); err != nil {
		return mapErr(err)
	}
	scopes, err := json.Marshal(nonNil(t.Scopes))
	if err != nil {
		return err
	}
	amr, err := json.Marshal(nonNil(t.AMR))
	if err != nil {
		return err
	}
	_, err = tx.q.exec(ctx, `INSERT INTO refresh_tokens (`+refreshCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		t.Hash, t.Family, t.Subject, t.ClientID, string(scopes), string(amr), nanos(t.AuthTime), nanos(t.CreatedAt),
		nanos(t.ExpiresAt), nanos(t.FamilyExpiresAt), nanos(t.UsedAt), t.AccessJTI, nanos(t.AccessExpiresAt))
	return mapErr(err)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// RefreshTokenByHash finds a refresh token, used or not; ErrNotFound when
// there is none.
func (tx *Tx) RefreshTokenByHash(ctx context.Context, hash string) (RefreshToken, error) {
	return scanRefresh(tx.q.queryRow(ctx, `SELECT `+refreshCols+` FROM refresh_tokens WHERE hash = ?`, hash))
}

// MarkRefreshTokenUsed marks the current token hash as rotated at now;
// ErrNotFound when it is not current (used already, or gone), which is
// how a concurrent second use is told apart.
func (tx *Tx) MarkRefreshTokenUsed(ctx context.Context, hash string, now time.Time) error {
	n, err := tx.q.exec(ctx, `UPDATE refresh_tokens SET used_at = ? WHERE hash = ? AND used_at = 0`, nanos(now), hash)
	return affected(n, err)
}

// TrimRefreshFamily keeps the keep most recent used tokens of a family
// (for reuse detection) and deletes older ones.
func (tx *Tx) TrimRefreshFamily(ctx context.Context, family string, keep int) error {
	_, err := tx.q.exec(ctx, `DELETE FROM refresh_tokens WHERE family = ? AND used_at <> 0 AND hash NOT IN (
		SELECT hash FROM refresh_tokens WHERE family = ? AND used_at <> 0 ORDER BY used_at DESC LIMIT ?)`, family, family, keep)
	return mapErr(err)
}

// RefreshFamilies lists the live families of subject, oldest login first.
func (tx *Tx) RefreshFamilies(ctx context.Context, subject string) ([]string, error) {
	return queryAll(ctx, tx.q, func(r scanner) (string, error) {
		var f string
		return f, r.Scan(&f)
	}, `SELECT family FROM refresh_tokens WHERE subject = ? GROUP BY family ORDER BY MIN(created_at), family`, subject)
}

// DeleteRefreshFamily deletes every token of a family and records its
// latest access tokens as revoked until they expire.
func (tx *Tx) DeleteRefreshFamily(ctx context.Context, family string, now time.Time) error {
	return tx.deleteRefresh(ctx, `family = ?`, now, family)
}

// DeleteRefreshTokensOf deletes a subject's refresh tokens (of one client,
// or of all when clientID is empty) and revokes the access tokens last
// issued from them. Used on logout, and when a user is blocked or deleted.
func (tx *Tx) DeleteRefreshTokensOf(ctx context.Context, subject, clientID string, now time.Time) error {
	if clientID == "" {
		return tx.deleteRefresh(ctx, `subject = ?`, now, subject)
	}
	return tx.deleteRefresh(ctx, `subject = ? AND client_id = ?`, now, subject, clientID)
}

func (tx *Tx) deleteRefresh(ctx context.Context, where string, now time.Time, args ...any) error {
	live, err := queryAll(ctx, tx.q, func(r scanner) (RefreshToken, error) {
		var t RefreshToken
		var exp int64
		err := r.Scan(&t.AccessJTI, &t.Subject, &exp)
		t.AccessExpiresAt = fromNanos(exp)
		return t, err
	}, `SELECT access_jti, subject, access_expires_at FROM refresh_tokens WHERE `+where+` AND access_jti <> '' AND access_expires_at > ?`,
		append(args, nanos(now))...)
	if err != nil {
		return err
	}
	for _, t := range live {
		if err := tx.RevokeAccessToken(ctx, t.AccessJTI, t.Subject, t.AccessExpiresAt, now); err != nil {
			return err
		}
	}
	_, err = tx.q.exec(ctx, `DELETE FROM refresh_tokens WHERE `+where, args...)
	return mapErr(err)
}

// CountRefreshTokens counts the stored refresh tokens of subject (all
// families, used ones included).
func (tx *Tx) CountRefreshTokens(ctx context.Context, subject string) (int, error) {
	var n int
	err := tx.q.queryRow(ctx, `SELECT COUNT(*) FROM refresh_tokens WHERE subject = ?`, subject).Scan(&n)
	return n, mapErr(err)
}
