package oidcop

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"

	"github.com/wiremesh/wiremesh/internal/ratelimit"
)

// GroupsClaim is the claim carrying a user's group names.
const GroupsClaim = "groups"

// Identity is a person as the directory knows it.
type Identity struct {
	Subject string
	Email   string
	Name    string
	Groups  []string
}

// ErrBadCredentials is a wrong e-mail address or password.
var ErrBadCredentials = errors.New("wrong e-mail address or password")

// Directory authenticates people and describes them.
type Directory interface {
	Authenticate(ctx context.Context, email, password string) (Identity, error)
	Lookup(ctx context.Context, subject string) (Identity, error)
}

// Options configure a provider.
type Options struct {
	// Issuer is the provider's absolute URL; its path is where the handler
	// expects to be mounted (e.g. https://vpn.example.com/oauth2).
	Issuer    string
	Directory Directory
	// Key signs tokens; callers persist it so tokens survive restarts.
	Key     *rsa.PrivateKey
	Clients []ClientConfig
	// TokenTTL is the lifetime of access tokens (0: one hour).
	TokenTTL time.Duration
	// DeviceLifetime is how long a device code may wait for approval
	// (0: 10 minutes).
	DeviceLifetime time.Duration
	Log            *slog.Logger
}

// Endpoints are the provider's absolute URLs.
type Endpoints struct {
	Issuer, Authorization, Token, DeviceAuthorization, JWKS, Userinfo string
}

// Provider is a running OpenID Connect provider; it is an http.Handler.
type Provider struct {
	op     *op.Provider
	st     *storage
	issuer string
	prefix string // the issuer's path, without a trailing slash
	log    *slog.Logger
	// guard slows password guessing: 10 failures per source, then one per 6 s.
	guard *ratelimit.Failures
}

// New builds a provider.
func New(o Options) (*Provider, error) {
	if o.Directory == nil || o.Key == nil {
		return nil, errors.New("oidcop: a directory and a signing key are required")
	}
	u, err := url.Parse(o.Issuer)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("oidcop: issuer %q is not an absolute http(s) URL", o.Issuer)
	}
	if o.TokenTTL <= 0 {
		o.TokenTTL = time.Hour
	}
	if o.DeviceLifetime <= 0 {
		o.DeviceLifetime = pendingLifetime
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	issuer := strings.TrimSuffix(o.Issuer, "/")
	prefix := strings.TrimSuffix(u.Path, "/")
	der, err := x509.MarshalPKIXPublicKey(&o.Key.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("oidcop: signing key: %w", err)
	}
	sum := sha256.Sum256(der)
	st := &storage{
		dir: o.Directory, key: o.Key, keyID: hex.EncodeToString(sum[:8]), clients: map[string]*Client{}, tokenTTL: o.TokenTTL,
		requests: map[string]*authRequest{}, codes: map[string]string{}, devices: map[string]*deviceAuth{}, userCodes: map[string]string{},
	}
	p := &Provider{st: st, issuer: issuer, prefix: prefix, log: o.Log, guard: ratelimit.New(10, 6*time.Second, nil)}
	for _, c := range o.Clients {
		st.clients[c.ID] = &Client{cfg: c, loginURL: func(id string) string { return prefix + loginPath + "?authRequestID=" + url.QueryEscape(id) }}
	}
	cfg := &op.Config{
		CodeMethodS256:     true,
		SupportedUILocales: []language.Tag{language.English},
		SupportedScopes:    []string{"openid", "profile", "email", GroupsClaim},
		DeviceAuthorization: op.DeviceAuthorizationConfig{
			// Agents poll every 2 s: a login completes quickly after approval.
			Lifetime: o.DeviceLifetime, PollInterval: 2 * time.Second,
			UserFormPath: prefix + devicePath, UserCode: op.UserCodeBase20,
		},
	}
	// The crypto key encrypts opaque tokens, which this provider does not
	// issue (access tokens are JWTs); it is random per process.
	if _, err := rand.Read(cfg.CryptoKey[:]); err != nil {
		return nil, err
	}
	var opts []op.Option
	if u.Scheme == "http" {
		opts = append(opts, op.WithAllowInsecure())
	}
	if p.op, err = op.NewProvider(cfg, st, op.StaticIssuer(issuer), opts...); err != nil {
		return nil, fmt.Errorf("oidcop: %w", err)
	}
	return p, nil
}

// Issuer is the provider's issuer URL.
func (p *Provider) Issuer() string { return p.issuer }

// PublicKey is the key tokens are signed with, and its key ID.
func (p *Provider) PublicKey() (*rsa.PublicKey, string) { return &p.st.key.PublicKey, p.st.keyID }

// Endpoints lists the provider's URLs.
func (p *Provider) Endpoints() Endpoints {
	return Endpoints{
		Issuer:              p.issuer,
		Authorization:       p.op.AuthorizationEndpoint().Absolute(p.issuer),
		Token:               p.op.TokenEndpoint().Absolute(p.issuer),
		DeviceAuthorization: p.op.DeviceAuthorizationEndpoint().Absolute(p.issuer),
		JWKS:                p.op.KeysEndpoint().Absolute(p.issuer),
		Userinfo:            p.op.UserinfoEndpoint().Absolute(p.issuer),
	}
}

const (
	loginPath  = "/login"
	devicePath = "/device"
)

// ServeHTTP serves the provider's endpoints and pages under the issuer's path.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, p.prefix)
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Frame-Options", "DENY")
	switch rest {
	case loginPath:
		p.login(w, r)
		return
	case devicePath:
		p.device(w, r)
		return
	}
	http.StripPrefix(p.prefix, p.op).ServeHTTP(w, r)
}

// callbackURL is where a completed login returns to pkg/op, which then
// redirects to the client with a code.
func (p *Provider) callbackURL(id string) string {
	return p.op.AuthorizationEndpoint().Absolute(p.issuer) + "/callback?id=" + url.QueryEscape(id)
}

func sourceAddr(r *http.Request) netip.Addr {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// authenticate checks a password, slowing down sources that guess.
func (p *Provider) authenticate(r *http.Request, email, password string) (Identity, error) {
	src := sourceAddr(r)
	if !p.guard.Allow(src) {
		return Identity{}, errTooMany
	}
	id, err := p.st.dir.Authenticate(r.Context(), strings.TrimSpace(email), password)
	if errors.Is(err, ErrBadCredentials) {
		p.guard.Fail(src)
	}
	return id, err
}

var errTooMany = errors.New("too many failed logins from this address; wait a minute")
