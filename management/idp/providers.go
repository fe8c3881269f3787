package idp

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
)

// Errors of the identity-provider administration, mapped to HTTP statuses
// by the REST API.
var (
	// ErrInvalid is a field that cannot be stored (422).
	ErrInvalid = errors.New("invalid identity provider")
	// ErrForbidden is a caller whose role may not do it (403).
	ErrForbidden = errors.New("the caller's role may not do this to identity providers")
)

// ProviderTypes are the kinds of upstream provider the API accepts, as the
// reference names them; every one is spoken to as OpenID Connect.
var ProviderTypes = []string{"oidc", "zitadel", "entra", "google", "okta", "pocketid", "microsoft", "adfs"}

// Bounds on what an account may store.
const (
	MaxProvidersPerAccount = 10
	maxName                = 64
	maxIssuer              = 512
	maxClientID            = 256
	maxClientSecret        = 1024
)

// ProviderInput is an identity provider as an admin writes it. An empty
// ClientSecret on update keeps the stored one (it is never returned, so
// a client cannot send it back).
type ProviderInput struct {
	Type, Name, Issuer, ClientID, ClientSecret string
}

// Providers administers the upstream identity providers of accounts.
type Providers struct {
	Store *store.Store
	// Secrets seals client secrets before they are stored (required to
	// store one).
	Secrets *secretbox.Box
	Now     func() time.Time
}

// seal returns the stored form of a provider's client secret: sealed,
// bound to the provider's ID; empty stays empty (a public client).
func (p Providers) seal(id, secret string) (string, error) {
	if secret == "" {
		return "", nil
	}
	if p.Secrets == nil {
		return "", errors.New("identity providers: no store encryption key to seal the client secret with")
	}
	return p.Secrets.Seal(secret, id)
}

func (p Providers) now() time.Time {
	if p.Now == nil {
		return time.Now().UTC()
	}
	return p.Now().UTC()
}

// List returns the caller's account's providers.
func (p Providers) List(ctx context.Context, caller account.User) ([]store.IdentityProvider, error) {
	if !may(caller, auth.Read) {
		return nil, ErrForbidden
	}
	var out []store.IdentityProvider
	err := p.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		out, err = tx.In(caller.AccountID).IdentityProviders(ctx)
		return err
	})
	return out, err
}

// Get returns one of the caller's account's providers.
func (p Providers) Get(ctx context.Context, caller account.User, id string) (store.IdentityProvider, error) {
	if !may(caller, auth.Read) {
		return store.IdentityProvider{}, ErrForbidden
	}
	var out store.IdentityProvider
	err := p.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		out, err = tx.In(caller.AccountID).IdentityProvider(ctx, id)
		return err
	})
	return out, err
}

// Create adds a provider to the caller's account.
func (p Providers) Create(ctx context.Context, caller account.User, in ProviderInput) (store.IdentityProvider, error) {
	if !may(caller, auth.Create) {
		return store.IdentityProvider{}, ErrForbidden
	}
	if err := checkProvider(&in); err != nil {
		return store.IdentityProvider{}, err
	}
	b := make([]byte, 10)
	_, _ = rand.Read(b)
	now := p.now()
	v := store.IdentityProvider{ID: hex.EncodeToString(b), AccountID: caller.AccountID, Type: in.Type, Name: in.Name, Issuer: in.Issuer,
		ClientID: in.ClientID, CreatedAt: now}
	sealed, err := p.seal(v.ID, in.ClientSecret)
	if err != nil {
		return store.IdentityProvider{}, err
	}
	v.ClientSecret = sealed
	err = p.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if _, err := at.Lock(ctx); err != nil {
			return err
		}
		have, err := at.IdentityProviders(ctx)
		if err != nil {
			return err
		}
		if len(have) >= MaxProvidersPerAccount {
			return fmt.Errorf("%w: an account has at most %d identity providers", ErrInvalid, MaxProvidersPerAccount)
		}
		if err := at.InsertIdentityProvider(ctx, v); err != nil {
			return err
		}
		return event(ctx, at, now, caller, "identityprovider.create", v)
	})
	if err != nil {
		return store.IdentityProvider{}, err
	}
	return v, nil
}

// Update replaces a provider's settings.
func (p Providers) Update(ctx context.Context, caller account.User, id string, in ProviderInput) (store.IdentityProvider, error) {
	if !may(caller, auth.Update) {
		return store.IdentityProvider{}, ErrForbidden
	}
	if err := checkProvider(&in); err != nil {
		return store.IdentityProvider{}, err
	}
	now := p.now()
	sealed, err := p.seal(id, in.ClientSecret)
	if err != nil {
		return store.IdentityProvider{}, err
	}
	var v store.IdentityProvider
	err = p.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		var err error
		if v, err = at.IdentityProvider(ctx, id); err != nil {
			return err
		}
		v.Type, v.Name, v.Issuer, v.ClientID = in.Type, in.Name, in.Issuer, in.ClientID
		if in.ClientSecret != "" {
			v.ClientSecret = sealed
		}
		if err := at.UpdateIdentityProvider(ctx, v); err != nil {
			return err
		}
		return event(ctx, at, now, caller, "identityprovider.update", v)
	})
	if err != nil {
		return store.IdentityProvider{}, err
	}
	return v, nil
}

// Delete removes a provider. Users who logged in with it stay (an admin
// deletes them as users); they can no longer log in with it.
func (p Providers) Delete(ctx context.Context, caller account.User, id string) error {
	if !may(caller, auth.Delete) {
		return ErrForbidden
	}
	now := p.now()
	return p.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		v, err := at.IdentityProvider(ctx, id)
		if err != nil {
			return err
		}
		if err := at.DeleteIdentityProvider(ctx, id); err != nil {
			return err
		}
		return event(ctx, at, now, caller, "identityprovider.delete", v)
	})
}

// may applies the role table (an auditor or network admin reads, an admin
// or owner also writes), whichever door the call comes in by.
func may(caller account.User, op auth.Operation) bool {
	return auth.Can(caller, auth.IdentityProviders, op) == auth.All
}

func event(ctx context.Context, at *store.AccountTx, now time.Time, caller account.User, activity string, v store.IdentityProvider) error {
	_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: activity, Initiator: string(caller.ID), Target: v.ID,
		Meta: map[string]string{"name": v.Name, "type": v.Type, "issuer": v.Issuer}})
	return err
}

// checkProvider normalises and checks an admin's input.
func checkProvider(in *ProviderInput) error {
	in.Type = strings.TrimSpace(in.Type)
	in.Name = strings.TrimSpace(in.Name)
	in.Issuer = strings.TrimSuffix(strings.TrimSpace(in.Issuer), "/")
	in.ClientID = strings.TrimSpace(in.ClientID)
	switch {
	case !slices.Contains(ProviderTypes, in.Type):
		return fmt.Errorf("%w: type must be one of %s", ErrInvalid, strings.Join(ProviderTypes, ", "))
	case in.Name == "" || len(in.Name) > maxName:
		return fmt.Errorf("%w: name must be 1 to %d characters", ErrInvalid, maxName)
	case in.ClientID == "" || len(in.ClientID) > maxClientID:
		return fmt.Errorf("%w: client_id must be 1 to %d characters", ErrInvalid, maxClientID)
	case len(in.ClientSecret) > maxClientSecret:
		return fmt.Errorf("%w: client_secret must be at most %d characters", ErrInvalid, maxClientSecret)
	}
	return checkIssuer(in.Issuer)
}

// checkIssuer accepts an absolute https URL without query or fragment;
// plain http only on a loopback host (a provider on the same machine).
func checkIssuer(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || len(s) > maxIssuer || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return fmt.Errorf("%w: issuer must be the provider's absolute https URL (at most %d characters, no query)", ErrInvalid, maxIssuer)
	}
	switch u.Scheme {
	case "https":
		return nil
	case "http":
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || (ip != nil && ip.IsLoopback()) {
			return nil
		}
	}
	return fmt.Errorf("%w: issuer must use https (plain http only on localhost)", ErrInvalid)
}
