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
	"sync/atomic"
	"time"

	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"

	"github.com/wiremesh/wiremesh/internal/clientip"
	"github.com/wiremesh/wiremesh/internal/metrics"
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
	// TrustedProxies are reverse proxies whose X-Forwarded-For is believed
	// when limiting per source; from any other peer it is ignored.
	TrustedProxies []netip.Prefix
	// Limits bound pending logins and device codes (zero: defaults).
	Limits Limits
	// Refresh keeps refresh tokens; with it, a login asking for the
	// offline_access scope gets one (rotated on every use). Nil: none.
	Refresh RefreshStore
	// RefreshIdle is how long an unused refresh token lives (0: 14 days);
	// RefreshMaxAge how long a login lasts however often it is refreshed
	// (0: 90 days).
	RefreshIdle, RefreshMaxAge time.Duration
	// Upstreams are OpenID Connect providers offered on the login page
	// (nil: none).
	Upstreams Upstreams
	// SecondFactor asks password logins for a TOTP code (nil: none).
	SecondFactor SecondFactor
	// HTTPClient talks to upstream providers (nil: one with a 15 s
	// timeout).
	HTTPClient *http.Client
	// Now is the clock of pending state and login limits (nil: time.Now).
	Now func() time.Time
	Log *slog.Logger
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
	ips    clientip.Resolver
	// perPair limits wrong passwords per (source, e-mail): 10 at once, then
	// one per 6 s; a source may be failing on at most 64 e-mail addresses.
	// perEmail limits them per e-mail over all sources, higher (50), so
	// that one source cannot lock an address out for everyone but many
	// cannot guess without bound. A password is evaluated only with a
	// token from both: bcrypt is the expensive part, and an evaluation of
	// a right password is an oracle for a wrong one.
	perPair, perEmail *ratelimit.Limiter
	// codes limits wrong second-factor codes per subject over all sources,
	// far stricter than passwords (see codeBurst).
	codes         *ratelimit.Limiter
	loginFailures atomic.Int64
	// Refusals are logged at most once per 10 s each, with how many
	// were not: a flood must not flood the log.
	limitLog, pendingLog *ratelimit.Every
	upstreams            Upstreams
	mfa                  SecondFactor
	httpClient           *http.Client
	secure               bool // the issuer is https: cookies are Secure
	// authorizePath and deviceAuthPath are pkg/op's endpoints that create
	// pending state, relative to the issuer.
	authorizePath, deviceAuthPath string
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
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RefreshIdle <= 0 {
		o.RefreshIdle = defaultRefreshIdle
	}
	if o.RefreshMaxAge <= 0 {
		o.RefreshMaxAge = defaultRefreshMaxAge
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
		upstream: map[string]*upstreamLogin{},
		limits:   o.Limits.withDefaults(), now: o.Now, bySource: map[netip.Addr]*usage{}, log: o.Log,
		refresh: o.Refresh, refreshIdle: o.RefreshIdle, refreshMaxAge: o.RefreshMaxAge,
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: upstreamTimeout}
	}
	p := &Provider{st: st, issuer: issuer, prefix: prefix, log: o.Log, ips: clientip.Resolver{Trusted: o.TrustedProxies},
		upstreams: o.Upstreams, mfa: o.SecondFactor, httpClient: o.HTTPClient, secure: u.Scheme == "https",
		perPair:  ratelimit.New(ratelimit.Options{Burst: pairBurst, Refill: refill, MaxKeys: 20000, MaxPerSource: 64, Now: o.Now}),
		perEmail: ratelimit.New(ratelimit.Options{Burst: emailBurst, Refill: refill, MaxKeys: 20000, Now: o.Now}),
		codes:    ratelimit.New(ratelimit.Options{Burst: codeBurst, Refill: codeRefill, MaxKeys: 20000, Now: o.Now}),
		limitLog: ratelimit.NewEvery(10*time.Second, o.Now), pendingLog: ratelimit.NewEvery(10*time.Second, o.Now),
	}
	for _, c := range o.Clients {
		st.clients[c.ID] = &Client{cfg: c, refresh: o.Refresh != nil,
			loginURL: func(id string) string { return prefix + loginPath + "?authRequestID=" + url.QueryEscape(id) }}
	}
	cfg := &op.Config{
		CodeMethodS256:        true,
		GrantTypeRefreshToken: o.Refresh != nil,
		SupportedUILocales:    []language.Tag{language.English},
		SupportedScopes:       supportedScopes(o.Refresh != nil),
		// An end-session request without a registered post-logout URI
		// lands on the provider's own page.
		DefaultLogoutRedirectURI: prefix + loggedOutPath,
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
	p.authorizePath = "/" + strings.TrimPrefix(p.op.AuthorizationEndpoint().Relative(), "/")
	p.deviceAuthPath = "/" + strings.TrimPrefix(p.op.DeviceAuthorizationEndpoint().Relative(), "/")
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
	loginPath     = "/login"
	devicePath    = "/device"
	loggedOutPath = "/logged-out"
)

func supportedScopes(refresh bool) []string {
	sc := []string{"openid", "profile", "email", GroupsClaim}
	if refresh {
		sc = append(sc, "offline_access")
	}
	return sc
}

// ServeHTTP serves the provider's endpoints and pages under the issuer's path.
func (p *Provider) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest, ok := strings.CutPrefix(r.URL.Path, p.prefix)
	if !ok || (rest != "" && !strings.HasPrefix(rest, "/")) {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("X-Frame-Options", "DENY")
	if len(r.URL.RawQuery) > maxQuery {
		oauthError(w, http.StatusRequestURITooLong, "invalid_request", fmt.Sprintf("the query is longer than %d bytes", maxQuery))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	src := p.ips.FromRequest(r)
	r = r.WithContext(withSource(r.Context(), src))
	switch rest {
	case loginPath:
		p.login(w, r)
		return
	case devicePath:
		p.device(w, r)
		return
	case mfaPath:
		if p.mfa == nil {
			http.NotFound(w, r)
			return
		}
		p.secondFactor(w, r)
		return
	case upstreamPath:
		if p.upstreams == nil {
			http.NotFound(w, r)
			return
		}
		p.upstreamStart(w, r)
		return
	case upstreamCallback:
		if p.upstreams == nil {
			http.NotFound(w, r)
			return
		}
		p.upstreamReturn(w, r)
		return
	case loggedOutPath:
		render(w, http.StatusOK, pageData{Title: "Logged out", Message: "You are logged out. You can close this window."})
		return
	case p.authorizePath, p.deviceAuthPath:
		// These create pending state: bound every field and reserve room
		// before pkg/op sees the request.
		if err := r.ParseForm(); err != nil {
			p.st.refusedFields.Add(1)
			oauthError(w, http.StatusBadRequest, "invalid_request", "the request could not be read (at most 64 KiB)")
			return
		}
		if err := checkParams(r.Form); err != nil {
			p.st.refusedFields.Add(1)
			oauthError(w, http.StatusBadRequest, "invalid_request", err.Error())
			return
		}
		sl, err := p.st.reserve(src, valuesSize(r.Form))
		if err != nil {
			if ok, n := p.pendingLog.Allow(); ok {
				p.log.Warn("oidc request refused: pending requests full", "src", src, "err", err, "not_logged", n)
			}
			status := http.StatusTooManyRequests
			if errors.Is(err, errAllFull) {
				status = http.StatusServiceUnavailable
			}
			oauthError(w, status, "temporarily_unavailable", err.Error())
			return
		}
		defer p.st.release(sl)
		r = r.WithContext(context.WithValue(r.Context(), slotKey, sl))
	}
	http.StripPrefix(p.prefix, p.op).ServeHTTP(w, r)
}

// callbackURL is where a completed login returns to pkg/op, which then
// redirects to the client with a code.
func (p *Provider) callbackURL(id string) string {
	return p.op.AuthorizationEndpoint().Absolute(p.issuer) + "/callback?id=" + url.QueryEscape(id)
}

// Password guessing limits: a source gets pairBurst wrong passwords per
// e-mail address, an address emailBurst over all sources, then one more
// each per refill.
const (
	pairBurst  = 10
	emailBurst = 50
	refill     = 6 * time.Second
)

// authenticate checks a password, slowing down guessing. Only wrong
// passwords count; the limit is per (source, e-mail) and per e-mail, so a
// guesser behind a shared address locks out only the address it guesses,
// and only from its own source until the per-e-mail bound.
func (p *Provider) authenticate(r *http.Request, email, password string) (Identity, error) {
	ctx := r.Context()
	src := sourceFrom(ctx)
	email = strings.TrimSpace(email)
	subject := strings.ToLower(email)
	pair, err := p.perPair.Reserve(ratelimit.Key{Src: src, Subject: subject})
	if err != nil {
		p.limitTrip(src, email, "source_email", err)
		return Identity{}, fmt.Errorf("%w: %w", errTooMany, err)
	}
	each, err := p.perEmail.Reserve(ratelimit.Key{Subject: subject})
	if err != nil {
		pair.Success() // not evaluated: nothing failed
		p.limitTrip(src, email, "email", err)
		return Identity{}, fmt.Errorf("%w: %w", errTooManyEmail, err)
	}
	id, err := p.st.dir.Authenticate(ctx, email, password)
	if errors.Is(err, ErrBadCredentials) {
		pair.Fail()
		each.Fail()
		p.loginFailures.Add(1)
		p.log.Warn("login failed", "src", src, "email", email)
		return id, err
	}
	pair.Success()
	each.Success()
	return id, err
}

func (p *Provider) limitTrip(src netip.Addr, email, limit string, err error) {
	if ok, n := p.limitLog.Allow(); ok {
		p.log.Warn("login refused: too many failures", "src", src, "email", email, "limit", limit, "err", err, "not_logged", n)
	}
}

var (
	errTooMany      = errors.New("too many failed logins for this e-mail address from this address; wait a minute")
	errTooManyEmail = errors.New("too many failed logins for this e-mail address; wait a few minutes")
)

// Metrics are the provider's counters: pending state and refusals.
func (p *Provider) Metrics() []metrics.Sample {
	pd := p.st.pendingNow()
	pl, pf := p.perPair.Refused()
	el, ef := p.perEmail.Refused()
	g := func(name, help string, v int) metrics.Sample {
		return metrics.Sample{Name: name, Help: help, Kind: metrics.Gauge, Value: float64(v)}
	}
	refused := func(reason string, v int64) metrics.Sample {
		return metrics.Sample{Name: "oidc_requests_refused_total", Help: "requests refused by the provider's bounds, by reason",
			Kind: metrics.Counter, Value: float64(v), Labels: `reason="` + reason + `"`}
	}
	return []metrics.Sample{
		g("oidc_pending_auth_requests", "pending authorization-code logins held", pd.AuthRequests),
		g("oidc_pending_device_codes", "pending device authorizations held", pd.DeviceCodes),
		g("oidc_pending_upstream_logins", "pending logins at upstream identity providers held", pd.UpstreamLogins),
		g("oidc_pending_bytes", "bytes charged to pending logins and device codes", pd.Bytes),
		g("oidc_pending_sources", "source addresses holding pending logins or device codes", pd.Sources),
		{Name: "oidc_login_failures_total", Help: "wrong e-mail address or password", Kind: metrics.Counter, Value: float64(p.loginFailures.Load())},
		refused("pending_per_source", p.st.refusedSource.Load()),
		refused("pending_total", p.st.refusedAll.Load()),
		refused("field_too_long", p.st.refusedFields.Load()),
		refused("login_limit_source_email", pl),
		refused("login_limit_email", el),
		refused("login_limit_table_full", pf+ef),
		{Name: "oidc_refresh_token_reuse_total", Help: "refresh tokens presented again after rotation (their logins were revoked)",
			Kind: metrics.Counter, Value: float64(p.st.refreshReuse.Load())},
	}
}
