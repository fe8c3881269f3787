package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// TOTPFactor is a local login's TOTP second factor, keyed by subject like
// the login (local_credentials); it goes with the login.
type TOTPFactor struct {
	Subject   string `json:"subject"`
	Secret    string `json:"secret"`
	Confirmed bool   `json:"confirmed"`
	// Recovery are the SHA-256 hashes (hex) of the unused recovery codes.
	Recovery []string `json:"recovery"`
	// LastStep is the last accepted time step.
	LastStep  int64     `json:"last_step"`
	CreatedAt time.Time `json:"created_at"`
}

// TOTPFactor finds subject's factor; ErrNotFound when it has none.
func (tx *Tx) TOTPFactor(ctx context.Context, subject string) (TOTPFactor, error) {
	var (
		f        TOTPFactor
		recovery string
		created  int64
	)
	err := tx.q.queryRow(ctx, `SELECT subject, secret, confirmed, recovery, last_step, created_at FROM totp_factors WHERE subject = ?`, subject).
		Scan(&f.Subject, &f.Secret, &f.Confirmed, &recovery, &f.LastStep, &created)
	if err != nil {
		return f, mapErr(err)
	}
	if err := json.Unmarshal([]byte(recovery), &f.Recovery); err != nil {
		return f, fmt.Errorf("totp recovery codes: %w", err)
	}
	f.CreatedAt = fromNanos(created)
	return f, nil
}

// PutTOTPFactor stores subject's factor, replacing the one it had.
func (tx *Tx) PutTOTPFactor(ctx context.Context, f TOTPFactor) error {
	rec, err := json.Marshal(nonNil(f.Recovery))
	if err != nil {
		return err
	}
	_, err = tx.q.exec(ctx, `INSERT INTO totp_factors (subject, secret, confirmed, recovery, last_step, created_at) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (subject) DO UPDATE SET secret = excluded.secret, confirmed = excluded.confirmed, recovery = excluded.recovery,
		last_step = excluded.last_step, created_at = excluded.created_at`,
		f.Subject, f.Secret, f.Confirmed, string(rec), f.LastStep, nanos(f.CreatedAt))
	return mapErr(err)
}

// UseTOTPStep records that step was accepted for subject, unless a step
// at or after it was already: ErrNotFound then (a replayed code).
func (tx *Tx) UseTOTPStep(ctx context.Context, subject string, step int64) error {
	n, err := tx.q.exec(ctx, `UPDATE totp_factors SET last_step = ? WHERE subject = ? AND confirmed AND last_step < ?`, step, subject, step)
	return affected(n, err)
}

// DeleteTOTPFactor removes subject's factor (none is not an error).
func (tx *Tx) DeleteTOTPFactor(ctx context.Context, subject string) error {
	_, err := tx.q.exec(ctx, `DELETE FROM totp_factors WHERE subject = ?`, subject)
	return mapErr(err)
}
