package store

import "context"

// This file holds the writes that seal secrets at rest (package
// secretbox): the key check value and the upstream identity providers'
// client secrets, rewritten by the start-up migration.

// ReplaceSetting stores a named value, replacing an existing one.
func (tx *Tx) ReplaceSetting(ctx context.Context, name, value string) error {
	if _, err := tx.q.exec(ctx, `DELETE FROM settings WHERE name = ?`, name); err != nil {
		return mapErr(err)
	}
	return tx.InsertSetting(ctx, name, value)
}

// SetIdentityProviderSecret replaces one provider's stored client secret
// (of any account); ErrNotFound when there is no such provider.
func (tx *Tx) SetIdentityProviderSecret(ctx context.Context, id, secret string) error {
	n, err := tx.q.exec(ctx, `UPDATE identity_providers SET client_secret = ? WHERE id = ?`, secret, id)
	return affected(n, err)
}
