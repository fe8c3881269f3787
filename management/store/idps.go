package store

import (
	"context"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

// This file holds the upstream identity providers an account added to the
// built-in provider's login page, and which user each upstream subject
// logs in as.

// IdentityProvider is an upstream OpenID Connect provider of an account.
type IdentityProvider struct {
	ID        string     `json:"id"`
	AccountID account.ID `json:"account_id"`
	Type      string     `json:"type"`
	Name      string     `json:"name"`
	Issuer    string     `json:"issuer"`
	ClientID  string     `json:"client_id"`
	// ClientSecret as stored: sealed with the store's encryption key.
	ClientSecret string    `json:"client_secret"`
	CreatedAt    time.Time `json:"created_at"`
}

// IdPLinkEntry is one upstream subject and the user it logs in as.
type IdPLinkEntry struct {
	ProviderID      string         `json:"provider_id"`
	UpstreamSubject string         `json:"upstream_subject"`
	UserID          account.UserID `json:"user_id"`
}

const idpCols = `id, account_id, type, name, issuer, client_id, client_secret, created_at`

func scanIdP(r scanner) (IdentityProvider, error) {
	var (
		p       IdentityProvider
		acc     string
		created int64
	)
	if err := r.Scan(&p.ID, &acc, &p.Type, &p.Name, &p.Issuer, &p.ClientID, &p.ClientSecret, &created); err != nil {
		return p, mapErr(err)
	}
	p.AccountID, p.CreatedAt = account.ID(acc), fromNanos(created)
	return p, nil
}

// IdentityProviders lists the account's providers, oldest first.
func (a *AccountTx) IdentityProviders(ctx context.Context) ([]IdentityProvider, error) {
	return queryAll(ctx, a.q(), scanIdP, `SELECT `+idpCols+` FROM identity_providers WHERE account_id = ? ORDER BY created_at, id`, string(a.id))
}

// IdentityProvider finds one of the account's providers.
func (a *AccountTx) IdentityProvider(ctx context.Context, id string) (IdentityProvider, error) {
	return scanIdP(a.q().queryRow(ctx, `SELECT `+idpCols+` FROM identity_providers WHERE account_id = ? AND id = ?`, string(a.id), id))
}

// InsertIdentityProvider adds a provider to the account.
func (a *AccountTx) InsertIdentityProvider(ctx context.Context, p IdentityProvider) error {
	_, err := a.q().exec(ctx, `INSERT INTO identity_providers (`+idpCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
		p.ID, string(a.id), p.Type, p.Name, p.Issuer, p.ClientID, p.ClientSecret, nanos(p.CreatedAt))
	return mapErr(err)
}

// UpdateIdentityProvider replaces a provider's settings.
func (a *AccountTx) UpdateIdentityProvider(ctx context.Context, p IdentityProvider) error {
	n, err := a.q().exec(ctx, `UPDATE identity_providers SET type = ?, name = ?, issuer = ?, client_id = ?, client_secret = ? WHERE account_id = ? AND id = ?`,
		p.Type, p.Name, p.Issuer, p.ClientID, p.ClientSecret, string(a.id), p.ID)
	return affected(n, err)
}

// DeleteIdentityProvider removes a provider and its links to users (the
// users stay).
func (a *AccountTx) DeleteIdentityProvider(ctx context.Context, id string) error {
	if _, err := a.q().exec(ctx, `DELETE FROM idp_links WHERE provider_id IN (SELECT id FROM identity_providers WHERE account_id = ? AND id = ?)`, string(a.id), id); err != nil {
		return mapErr(err)
	}
	n, err := a.q().exec(ctx, `DELETE FROM identity_providers WHERE account_id = ? AND id = ?`, string(a.id), id)
	return affected(n, err)
}

// AllIdentityProviders lists up to limit providers of every account, for
// the built-in provider's login page, oldest first.
func (tx *Tx) AllIdentityProviders(ctx context.Context, limit int) ([]IdentityProvider, error) {
	return queryAll(ctx, tx.q, scanIdP, `SELECT `+idpCols+` FROM identity_providers ORDER BY created_at, id LIMIT ?`, limit)
}

// IdentityProviderByID finds a provider of any account.
func (tx *Tx) IdentityProviderByID(ctx context.Context, id string) (IdentityProvider, error) {
	return scanIdP(tx.q.queryRow(ctx, `SELECT `+idpCols+` FROM identity_providers WHERE id = ?`, id))
}

// IdPLink is the user an upstream subject logs in as; ErrNotFound when
// it has not logged in yet.
func (tx *Tx) IdPLink(ctx context.Context, providerID, upstreamSubject string) (account.UserID, error) {
	var u string
	err := tx.q.queryRow(ctx, `SELECT user_id FROM idp_links WHERE provider_id = ? AND upstream_subject = ?`, providerID, upstreamSubject).Scan(&u)
	return account.UserID(u), mapErr(err)
}

// IdPLinks lists the links of the account's providers.
func (a *AccountTx) IdPLinks(ctx context.Context) ([]IdPLinkEntry, error) {
	return queryAll(ctx, a.q(), func(r scanner) (IdPLinkEntry, error) {
		var (
			l    IdPLinkEntry
			user string
		)
		err := r.Scan(&l.ProviderID, &l.UpstreamSubject, &user)
		l.UserID = account.UserID(user)
		return l, mapErr(err)
	}, `SELECT l.provider_id, l.upstream_subject, l.user_id FROM idp_links l JOIN identity_providers p ON p.id = l.provider_id
		WHERE p.account_id = ? ORDER BY l.provider_id, l.upstream_subject`, string(a.id))
}

// InsertIdPLink records that an upstream subject logs in as user.
func (tx *Tx) InsertIdPLink(ctx context.Context, providerID, upstreamSubject string, user account.UserID) error {
	_, err := tx.q.exec(ctx, `INSERT INTO idp_links (provider_id, upstream_subject, user_id) VALUES (?, ?, ?)`, providerID, upstreamSubject, string(user))
	return mapErr(err)
}
