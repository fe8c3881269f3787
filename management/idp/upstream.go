package idp

import (
	"context"
	"fmt"

	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
)

// maxLoginButtons bounds the upstream providers the login page offers
// (every account's; an account holds at most MaxProvidersPerAccount).
const maxLoginButtons = 50

// JoinFunc returns the user an upstream identity logs in as in the
// account that added the provider (package users decides: see
// users.Service.JoinUpstream).
type JoinFunc func(ctx context.Context, acc account.ID, providerID string, id oidcop.UpstreamIdentity) (account.UserID, error)

// Upstreams offers the accounts' identity providers on the built-in
// provider's login page.
type Upstreams struct {
	Store *store.Store
	Join  JoinFunc
	// Secrets opens the stored client secrets.
	Secrets *secretbox.Box
}

var _ oidcop.Upstreams = Upstreams{}

// toUpstream is a stored provider as the login needs it, its client
// secret opened. A value not sealed is one an instance of an older
// version wrote since this one started (the start-up migration seals the
// rest): used as it is.
func (u Upstreams) toUpstream(p store.IdentityProvider) (oidcop.Upstream, error) {
	secret := p.ClientSecret
	if secretbox.Sealed(secret) {
		if u.Secrets == nil {
			return oidcop.Upstream{}, fmt.Errorf("identity provider %q: no store encryption key to open its client secret", p.ID)
		}
		var err error
		if secret, err = u.Secrets.Open(secret, p.ID); err != nil {
			return oidcop.Upstream{}, fmt.Errorf("identity provider %q client secret: %w", p.ID, err)
		}
	}
	return oidcop.Upstream{ID: p.ID, Name: p.Name, Issuer: p.Issuer, ClientID: p.ClientID, ClientSecret: secret}, nil
}

// Upstreams implements oidcop.Upstreams.
func (u Upstreams) Upstreams(ctx context.Context) ([]oidcop.Upstream, error) {
	var list []store.IdentityProvider
	err := u.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		list, err = tx.AllIdentityProviders(ctx, maxLoginButtons)
		return err
	})
	out := make([]oidcop.Upstream, 0, len(list))
	for _, p := range list {
		// The login page shows names only: no secret is opened here.
		out = append(out, oidcop.Upstream{ID: p.ID, Name: p.Name, Issuer: p.Issuer, ClientID: p.ClientID})
	}
	return out, err
}

// Upstream implements oidcop.Upstreams.
func (u Upstreams) Upstream(ctx context.Context, id string) (oidcop.Upstream, error) {
	p, err := u.provider(ctx, id)
	if err != nil {
		return oidcop.Upstream{}, err
	}
	return u.toUpstream(p)
}

func (u Upstreams) provider(ctx context.Context, id string) (store.IdentityProvider, error) {
	var p store.IdentityProvider
	err := u.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		p, err = tx.IdentityProviderByID(ctx, id)
		return err
	})
	if err != nil {
		return p, fmt.Errorf("identity provider %q: %w", id, err)
	}
	return p, nil
}

// Login implements oidcop.Upstreams: the user is the account's that added
// the provider; its subject is the user's ID.
func (u Upstreams) Login(ctx context.Context, providerID string, id oidcop.UpstreamIdentity) (string, error) {
	p, err := u.provider(ctx, providerID)
	if err != nil {
		return "", err
	}
	uid, err := u.Join(ctx, p.AccountID, p.ID, id)
	return string(uid), err
}
