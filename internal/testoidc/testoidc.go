// Package testoidc runs a small OpenID Connect provider for tests, standing
// in for an external IdP (Keycloak, Zitadel, Entra...): a real issuer on a
// loopback port built on internal/oidcop (zitadel/oidc/v3 pkg/op), with
// in-memory users and its own signing key. Tests log in through its pages
// like a person would, and Mint signs arbitrary claims with its key so
// that expired, foreign-audience or otherwise bad tokens can be presented.
package testoidc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"errors"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"

	"github.com/wiremesh/wiremesh/internal/oidcop"
)

// ClientID is the public client the provider registers (device flow and
// PKCE with loopback redirects).
const ClientID = "test-client"

// User is a person the provider knows.
type User struct {
	Subject, Email, Name, Password string
	Groups                         []string
}

type directory struct {
	mu    sync.Mutex
	users map[string]User // by subject
}

func (d *directory) Authenticate(_ context.Context, email, password string) (oidcop.Identity, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, u := range d.users {
		if u.Email == email && u.Password == password {
			return oidcop.Identity{Subject: u.Subject, Email: u.Email, Name: u.Name, Groups: u.Groups}, nil
		}
	}
	return oidcop.Identity{}, oidcop.ErrBadCredentials
}

func (d *directory) Lookup(_ context.Context, subject string) (oidcop.Identity, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	u, ok := d.users[subject]
	if !ok {
		return oidcop.Identity{}, errors.New("no such user")
	}
	return oidcop.Identity{Subject: u.Subject, Email: u.Email, Name: u.Name, Groups: u.Groups}, nil
}

// Provider is a running test IdP.
type Provider struct {
	*oidcop.Provider
	URL string // the issuer
	key *rsa.PrivateKey
	dir *directory
}

// Start runs a provider on 127.0.0.1 (or on addr, when given) until the
// test ends.
func Start(t testing.TB, addr string, users ...User) *Provider {
	t.Helper()
	return StartWithRedirects(t, addr, nil, users...)
}

// StartWithRedirects is Start with further redirect URIs registered for
// ClientID (a loopback URI matches on any port, but its path must match):
// for a server that logs people in through this provider.
func StartWithRedirects(t testing.TB, addr string, redirects []string, users ...User) *Provider {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("test IdP: %v", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	dir := &directory{users: map[string]User{}}
	for _, u := range users {
		dir.users[u.Subject] = u
	}
	issuer := "http://" + ln.Addr().String() + "/idp"
	p, err := oidcop.New(oidcop.Options{Issuer: issuer, Directory: dir, Key: key,
		Clients: []oidcop.ClientConfig{{ID: ClientID, Native: true, RedirectURIs: append([]string{"http://localhost/", "http://127.0.0.1/"}, redirects...)}}})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	return &Provider{Provider: p, URL: issuer, key: key, dir: dir}
}

// Mint signs claims with the provider's key, as a token of this issuer
// would be signed. Standard claims the caller leaves out are filled in:
// iss, aud (ClientID), iat and exp (an hour from now).
func (p *Provider) Mint(t testing.TB, claims map[string]any) string {
	t.Helper()
	full := map[string]any{"iss": p.URL, "aud": ClientID, "iat": time.Now().Unix(), "exp": time.Now().Add(time.Hour).Unix()}
	for k, v := range claims {
		if v == nil {
			delete(full, k)
			continue
		}
		full[k] = v
	}
	return SignWith(t, p.key, keyID(p), full)
}

func keyID(p *Provider) string {
	_, id := p.PublicKey()
	return id
}

// SignWith signs claims with any RSA key as an RS256 JWT.
func SignWith(t testing.TB, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	payload, err := jsonMarshal(claims)
	if err != nil {
		t.Fatal(err)
	}
	obj, err := signer.Sign(payload)
	if err != nil {
		t.Fatal(err)
	}
	s, err := obj.CompactSerialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}
