// Package idp is management's built-in identity provider for installs that
// have none: local users with bcrypt-hashed passwords kept in the store,
// served as a real OpenID Connect issuer (internal/oidcop on
// zitadel/oidc/v3) to the dashboard and to agents. Its signing key lives in
// the store, so tokens stay valid across restarts and every management
// instance on the same database issues and accepts the same tokens;
// refresh tokens are kept there too (refresh.go). Accounts' upstream identity
// providers (providers.go: their administration; upstream.go: the login
// page's buttons) let people log in with another OpenID Connect provider.
// It authenticates; accounts and roles are package users' business.
package idp

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
)

// Client IDs of the built-in provider, as the reference's embedded IdP
// names them.
const (
	AgentClientID     = "netbird-client"
	DashboardClientID = "netbird-dashboard"
)

// AgentRedirectURLs are the loopback callbacks the official client listens
// on for the PKCE flow (any port matches for a native client).
var AgentRedirectURLs = []string{"http://localhost:53000/", "http://localhost:54000/"}

// DashboardCallbackPath is the dashboard's login callback on its origin
// (dashboard/src/auth/config.ts).
const DashboardCallbackPath = "/nb-auth"

// DashboardRedirectURIs are the login callbacks the dashboard client
// accepts: the one of the dashboard the server itself serves (the
// issuer's origin + DashboardCallbackPath) and the extra ones configured
// (a dashboard served elsewhere).
func DashboardRedirectURIs(issuer string, extra []string) []string {
	var out []string
	if u, err := url.Parse(issuer); err == nil && u.Host != "" && (u.Scheme == "http" || u.Scheme == "https") {
		out = append(out, u.Scheme+"://"+u.Host+DashboardCallbackPath)
	}
	for _, r := range extra {
		if r != "" && !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// ErrWeakPassword is a password shorter than MinPasswordLen.
var ErrWeakPassword = errors.New("password must be at least 8 characters")

// MinPasswordLen is the shortest password accepted.
const MinPasswordLen = 8

// HashPassword returns the bcrypt hash to store.
func HashPassword(pw string) (string, error) {
	if len(pw) < MinPasswordLen {
		return "", ErrWeakPassword
	}
	if len(pw) > 72 {
		return "", errors.New("password must be at most 72 bytes")
	}
	h, err := bcrypt.GenerateFromPassword([]byte(pw), bcrypt.DefaultCost)
	return string(h), err
}

// Directory authenticates against the store's local credentials.
type Directory struct{ Store *store.Store }

// dummyHash keeps a wrong e-mail address as slow as a wrong password, so
// response times do not reveal which addresses exist.
var dummyHash, _ = bcrypt.GenerateFromPassword([]byte("not a password of anyone"), bcrypt.DefaultCost)

// Authenticate implements oidcop.Directory.
func (d Directory) Authenticate(ctx context.Context, email, password string) (oidcop.Identity, error) {
	var c account.Credential
	err := d.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		c, err = tx.CredentialByEmail(ctx, email)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		_ = bcrypt.CompareHashAndPassword(dummyHash, []byte(password))
		return oidcop.Identity{}, oidcop.ErrBadCredentials
	}
	if err != nil {
		return oidcop.Identity{}, err
	}
	if bcrypt.CompareHashAndPassword([]byte(c.PasswordHash), []byte(password)) != nil {
		return oidcop.Identity{}, oidcop.ErrBadCredentials
	}
	return oidcop.Identity{Subject: string(c.Subject), Email: c.Email, Name: c.Name}, nil
}

// Lookup implements oidcop.Directory: a local login, or a user who logs
// in with an upstream identity provider (who has none).
func (d Directory) Lookup(ctx context.Context, subject string) (oidcop.Identity, error) {
	var id oidcop.Identity
	err := d.Store.Read(ctx, func(tx *store.Tx) error {
		c, err := tx.Credential(ctx, account.UserID(subject))
		if err == nil {
			id = oidcop.Identity{Subject: string(c.Subject), Email: c.Email, Name: c.Name}
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		u, err := tx.UserByID(ctx, account.UserID(subject))
		if err != nil {
			return err
		}
		id = oidcop.Identity{Subject: string(u.ID), Email: u.Email, Name: u.Name}
		return nil
	})
	if err != nil {
		return oidcop.Identity{}, fmt.Errorf("user %s: %w", subject, err)
	}
	return id, nil
}

// RevokeAccessToken implements oidcop.TokenRevoker: the revoked token's
// jti goes into the store, where every management instance's verifier
// refuses it.
func (d Directory) RevokeAccessToken(ctx context.Context, tokenID, subject string, until time.Time) error {
	return d.Store.Tx(ctx, func(tx *store.Tx) error {
		return tx.RevokeAccessToken(ctx, tokenID, subject, until, time.Now())
	})
}

const keySetting = "idp_signing_key"

// SigningKey loads the provider's RSA key from the store, creating it once.
func SigningKey(ctx context.Context, st *store.Store) (*rsa.PrivateKey, error) {
	for {
		var v string
		err := st.Read(ctx, func(tx *store.Tx) error {
			var err error
			v, err = tx.Setting(ctx, keySetting)
			return err
		})
		if err == nil {
			blk, _ := pem.Decode([]byte(v))
			if blk == nil {
				return nil, errors.New("idp signing key: stored value is not PEM")
			}
			return x509.ParsePKCS1PrivateKey(blk.Bytes)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, fmt.Errorf("idp signing key: %w", err)
		}
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			return nil, err
		}
		enc := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
		err = st.Tx(ctx, func(tx *store.Tx) error { return tx.InsertSetting(ctx, keySetting, string(enc)) })
		if err != nil && !errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("idp signing key: %w", err)
		}
		// Another instance may have won the race: read what is stored.
	}
}

// Options configure the built-in provider.
type Options struct {
	// Issuer is the provider's public URL, ending in /oauth2 by convention.
	Issuer string
	// DashboardRedirects are further login callbacks of dashboards served
	// elsewhere; the one of the dashboard on the issuer's origin
	// (DashboardRedirectURIs) is always allowed.
	DashboardRedirects []string
	// DashboardLogoutRedirects are further URIs the dashboard may return
	// to after logging out; the origins of DashboardRedirects and the
	// server's base URL are always allowed.
	DashboardLogoutRedirects []string
	// Now is the provider's clock (nil: time.Now).
	Now func() time.Time
	// Join maps people who log in with an account's upstream identity
	// provider to users (nil: no upstream providers are offered).
	Join JoinFunc
	// MFARequired tells whether a subject's account requires a second
	// factor (TOTP): the next password login then sets one up. Nil: none
	// is required (one set up is still asked for).
	MFARequired func(ctx context.Context, subject string) (bool, error)
	// HTTPClient talks to upstream providers (nil: one that refuses
	// loopback, link-local, private, CGNAT, multicast and this host's own
	// addresses, but UpstreamAllow's).
	HTTPClient *http.Client
	// UpstreamAllow are the exceptions to the default client's address
	// policy (a provider on the LAN, or on loopback in tests).
	UpstreamAllow UpstreamAllow
	// Secrets opens the upstream providers' sealed client secrets.
	Secrets *secretbox.Box
	// TrustedProxies are reverse proxies whose X-Forwarded-For is believed.
	TrustedProxies []netip.Prefix
	Log            *slog.Logger
}

// New opens the built-in provider on the store.
func New(ctx context.Context, st *store.Store, o Options) (*oidcop.Provider, error) {
	key, err := SigningKey(ctx, st)
	if err != nil {
		return nil, err
	}
	dashboardRedirects := DashboardRedirectURIs(o.Issuer, o.DashboardRedirects)
	var ups oidcop.Upstreams
	if o.Join != nil {
		ups = Upstreams{Store: st, Join: o.Join, Secrets: o.Secrets}
	}
	if o.HTTPClient == nil {
		if o.HTTPClient, err = UpstreamClient(o.UpstreamAllow); err != nil {
			return nil, err
		}
	}
	return oidcop.New(oidcop.Options{
		Upstreams:    ups,
		SecondFactor: TOTP{Store: st, Issuer: totpIssuer(o.Issuer), Required: o.MFARequired, Now: o.Now},
		HTTPClient:   o.HTTPClient,
		Issuer:       strings.TrimSuffix(o.Issuer, "/"),
		Directory:    Directory{Store: st},
		Key:          key,
		Log:          o.Log,
		// The login page's limits are per client address.
		TrustedProxies: o.TrustedProxies,
		Refresh:        RefreshStore{Store: st},
		Now:            o.Now,
		Clients: []oidcop.ClientConfig{
			{ID: AgentClientID, Native: true, RedirectURIs: AgentRedirectURLs, PostLogoutRedirectURIs: AgentRedirectURLs},
			{ID: DashboardClientID, RedirectURIs: dashboardRedirects,
				PostLogoutRedirectURIs: postLogoutURIs(o.Issuer, dashboardRedirects, o.DashboardLogoutRedirects)},
		},
	})
}

// totpIssuer names the server in authenticator apps: its host.
func totpIssuer(issuer string) string {
	if u, err := url.Parse(issuer); err == nil && u.Host != "" {
		return "wiremesh " + u.Hostname()
	}
	return "wiremesh"
}
