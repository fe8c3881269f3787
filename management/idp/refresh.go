package idp

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/management/store"
)

// keepUsed is how many rotated tokens of a login are kept to recognise
// their reuse; an older one presented again is merely unknown.
const keepUsed = 16

// RefreshStore keeps the provider's refresh tokens in the store, so that
// every management instance on the database honours and revokes them.
// Users are deleted and blocked by package users, which deletes their
// rows in the same transaction (store.Tx.DeleteRefreshTokensOf).
type RefreshStore struct{ Store *store.Store }

var _ oidcop.RefreshStore = RefreshStore{}

func toStore(t oidcop.RefreshToken) store.RefreshToken {
	var used time.Time
	if t.Used {
		used = t.Created
	}
	return store.RefreshToken{Hash: t.Hash, Family: t.Family, Subject: t.Subject, ClientID: t.ClientID, Scopes: t.Scopes, AMR: t.AMR,
		AuthTime: t.AuthTime, CreatedAt: t.Created, ExpiresAt: t.Expires, FamilyExpiresAt: t.FamilyExpires, UsedAt: used,
		AccessJTI: t.AccessID, AccessExpiresAt: t.AccessExpires}
}

func fromStore(t store.RefreshToken) oidcop.RefreshToken {
	return oidcop.RefreshToken{Hash: t.Hash, Family: t.Family, Subject: t.Subject, ClientID: t.ClientID, Scopes: t.Scopes, AMR: t.AMR,
		AuthTime: t.AuthTime, Created: t.CreatedAt, Expires: t.ExpiresAt, FamilyExpires: t.FamilyExpiresAt, Used: !t.UsedAt.IsZero(),
		AccessID: t.AccessJTI, AccessExpires: t.AccessExpiresAt}
}

// Start implements oidcop.RefreshStore.
func (r RefreshStore) Start(ctx context.Context, t oidcop.RefreshToken, maxFamilies int, now time.Time) error {
	return r.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.InsertRefreshToken(ctx, toStore(t), now); err != nil {
			return err
		}
		fams, err := tx.RefreshFamilies(ctx, t.Subject)
		if err != nil {
			return err
		}
		for len(fams) > maxFamilies {
			if err := tx.DeleteRefreshFamily(ctx, fams[0], now); err != nil {
				return err
			}
			fams = fams[1:]
		}
		return nil
	})
}

// ByHash implements oidcop.RefreshStore.
func (r RefreshStore) ByHash(ctx context.Context, hash string) (oidcop.RefreshToken, error) {
	var t store.RefreshToken
	err := r.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		t, err = tx.RefreshTokenByHash(ctx, hash)
		return err
	})
	if err != nil {
		return oidcop.RefreshToken{}, fmt.Errorf("refresh token: %w", err)
	}
	return fromStore(t), nil
}

// Rotate implements oidcop.RefreshStore.
func (r RefreshStore) Rotate(ctx context.Context, oldHash string, next oidcop.RefreshToken, now time.Time) error {
	err := r.Store.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.MarkRefreshTokenUsed(ctx, oldHash, now); err != nil {
			return err
		}
		if err := tx.InsertRefreshToken(ctx, toStore(next), now); err != nil {
			return err
		}
		return tx.TrimRefreshFamily(ctx, next.Family, keepUsed)
	})
	if errors.Is(err, store.ErrNotFound) {
		return oidcop.ErrRefreshNotCurrent
	}
	return err
}

// RevokeFamily implements oidcop.RefreshStore.
func (r RefreshStore) RevokeFamily(ctx context.Context, family string, now time.Time) error {
	return r.Store.Tx(ctx, func(tx *store.Tx) error { return tx.DeleteRefreshFamily(ctx, family, now) })
}

// RevokeOf implements oidcop.RefreshStore.
func (r RefreshStore) RevokeOf(ctx context.Context, subject, clientID string, now time.Time) error {
	return r.Store.Tx(ctx, func(tx *store.Tx) error { return tx.DeleteRefreshTokensOf(ctx, subject, clientID, now) })
}

// postLogoutURIs are where the dashboard may be sent after logging out:
// those configured, the origin of each of its login callbacks (with and
// without the trailing slash) and the server's base URL (the issuer
// without /oauth2), where the dashboard is usually served.
func postLogoutURIs(issuer string, redirects, extra []string) []string {
	out := slices.Clone(extra)
	add := func(s string) {
		if s != "" && !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	base := strings.TrimSuffix(strings.TrimSuffix(issuer, "/"), "/oauth2")
	add(base)
	add(base + "/")
	for _, r := range redirects {
		u, err := url.Parse(r)
		if err != nil || u.Host == "" {
			continue
		}
		origin := u.Scheme + "://" + u.Host
		add(origin)
		add(origin + "/")
	}
	return out
}
