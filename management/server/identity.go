package server

import (
	"context"
	"crypto"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"

	"github.com/wiremesh/wiremesh/dashboard"
	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/grpcapi"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// Identity configures who may log in: the built-in provider, an external
// OpenID Connect provider, or neither (setup keys and PATs only).
type Identity struct {
	// Mode places new users in accounts (default: one account).
	Mode users.Mode
	// AccountDomains: in domain mode, the e-mail domains whose verified
	// users share an account (users.ParseDomains normalises them).
	AccountDomains []string
	// BuiltInIssuer turns the built-in provider on at this public URL; its
	// path (conventionally /oauth2) is where the server mounts it.
	BuiltInIssuer string
	// DashboardRedirects are the dashboard's login callbacks (built-in).
	DashboardRedirects []string
	// UpstreamAllow are exceptions to the address policy of the built-in
	// provider's client for accounts' upstream providers (built-in).
	UpstreamAllow idp.UpstreamAllow

	// External provider, used when BuiltInIssuer is empty.
	Issuer   string
	ClientID string // the agent's client ID (device flow, PKCE)
	// DashboardClientID is the dashboard's client (code + PKCE); default
	// ClientID. Without explicit Audiences its tokens are accepted too.
	DashboardClientID string
	Audiences         []string // accepted token audiences (default: ClientID)
	Scopes            string   // requested by agents (default "openid profile email")
	GroupsClaim       string   // default "groups"
	UseIDToken        bool     // agents log in with the ID token instead of the access token
	// RedirectURLs for the agent's PKCE flow (default: the official
	// client's loopback callbacks).
	RedirectURLs []string
}

// enabled reports whether any identity provider is configured.
func (i Identity) enabled() bool { return i.BuiltInIssuer != "" || i.Issuer != "" }

// sso adapts verification and the user directory to the gRPC API.
type sso struct {
	verifier *auth.Verifier
	users    *users.Service
	flows    func(ctx context.Context) (grpcapi.Flows, error)
	// sshJWT is the provider as agents' SSH servers check its tokens
	// (NetBird's JWT check for SSH).
	sshJWT func(ctx context.Context) (grpcapi.SSHJWT, error)
}

// SSHJWT implements grpcapi.SSHJWTSource.
func (s sso) SSHJWT(ctx context.Context) (grpcapi.SSHJWT, error) { return s.sshJWT(ctx) }

func (s sso) LoginUser(ctx context.Context, jwt string) (account.User, error) {
	c, err := s.verifier.Verify(ctx, jwt)
	if err != nil {
		if errors.Is(err, auth.ErrIdPUnusable) {
			return account.User{}, fmt.Errorf("%w: %w", grpcapi.ErrSSOUnavailable, err)
		}
		return account.User{}, fmt.Errorf("%w: %w", grpcapi.ErrSSOToken, err)
	}
	u, err := s.users.FromClaims(ctx, c)
	if errors.Is(err, users.ErrBlocked) || errors.Is(err, users.ErrNotAllowedGroup) || errors.Is(err, users.ErrPendingApproval) {
		return account.User{}, fmt.Errorf("%w: %w", grpcapi.ErrSSOToken, err)
	}
	return u, err
}

func (s sso) Flows(ctx context.Context) (grpcapi.Flows, error) { return s.flows(ctx) }

// openIdentity sets up the provider (if built in), the token verifier and
// the SSO adapter.
func openIdentity(ctx context.Context, st *store.Store, id Identity, us *users.Service, box *secretbox.Box, o Options) (*oidcop.Provider, *auth.Verifier, grpcapi.SSO, error) {
	if !id.enabled() {
		return nil, nil, nil, nil
	}
	scopes := id.Scopes
	if scopes == "" {
		scopes = "openid profile email"
	}
	if id.BuiltInIssuer != "" {
		p, err := idp.New(ctx, st, idp.Options{Issuer: id.BuiltInIssuer, DashboardRedirects: id.DashboardRedirects, Log: o.Log,
			TrustedProxies: o.TrustedProxies, UpstreamAllow: id.UpstreamAllow, Secrets: box, Join: joinUpstream(us), MFARequired: mfaRequired(st)})
		if err != nil {
			return nil, nil, nil, err
		}
		pub, _ := p.PublicKey()
		v, err := auth.NewVerifier(auth.JWTConfig{Issuer: p.Issuer(), Audiences: []string{idp.AgentClientID, idp.DashboardClientID},
			KeySet: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{pub}}})
		if err != nil {
			return nil, nil, nil, err
		}
		ep := p.Endpoints()
		flows := grpcapi.Flows{ClientID: idp.AgentClientID, Audience: idp.AgentClientID, Scope: scopes,
			AuthorizationEndpoint: ep.Authorization, TokenEndpoint: ep.Token, DeviceAuthEndpoint: ep.DeviceAuthorization,
			RedirectURLs: idp.AgentRedirectURLs}
		// SSH logins carry the agent's device-flow token; the dashboard's
		// are accepted as management accepts them.
		sshJWT := grpcapi.SSHJWT{Issuer: p.Issuer(), Audiences: []string{idp.AgentClientID, idp.DashboardClientID}, KeysLocation: ep.JWKS,
			MaxTokenAge: sshMaxTokenAge}
		return p, v, sso{verifier: v, users: us, flows: func(context.Context) (grpcapi.Flows, error) { return flows, nil },
			sshJWT: func(context.Context) (grpcapi.SSHJWT, error) { return sshJWT, nil }}, nil
	}
	if id.ClientID == "" {
		return nil, nil, nil, errors.New("an external identity provider needs the agents' client ID (--oidc-client-id)")
	}
	auds := id.Audiences
	if len(auds) == 0 {
		auds = []string{id.ClientID}
		if id.DashboardClientID != "" && id.DashboardClientID != id.ClientID {
			auds = append(auds, id.DashboardClientID)
		}
	}
	v, err := auth.NewVerifier(auth.JWTConfig{Issuer: id.Issuer, Audiences: auds, GroupsClaim: id.GroupsClaim})
	if err != nil {
		return nil, nil, nil, err
	}
	redirects := id.RedirectURLs
	if len(redirects) == 0 {
		redirects = idp.AgentRedirectURLs
	}
	flows := func(ctx context.Context) (grpcapi.Flows, error) {
		p, err := v.Provider(ctx)
		if err != nil {
			return grpcapi.Flows{}, err
		}
		ep := p.Endpoint()
		return grpcapi.Flows{ClientID: id.ClientID, Audience: auds[0], Scope: scopes, UseIDToken: id.UseIDToken,
			AuthorizationEndpoint: ep.AuthURL, TokenEndpoint: ep.TokenURL, DeviceAuthEndpoint: ep.DeviceAuthURL, RedirectURLs: redirects}, nil
	}
	sshJWT := func(ctx context.Context) (grpcapi.SSHJWT, error) {
		p, err := v.Provider(ctx)
		if err != nil {
			return grpcapi.SSHJWT{}, err
		}
		var d struct {
			JWKS string `json:"jwks_uri"`
		}
		if err := p.Claims(&d); err != nil {
			return grpcapi.SSHJWT{}, fmt.Errorf("provider discovery: %w", err)
		}
		return grpcapi.SSHJWT{Issuer: id.Issuer, Audiences: auds, KeysLocation: d.JWKS, MaxTokenAge: sshMaxTokenAge}, nil
	}
	return nil, v, sso{verifier: v, users: us, flows: flows, sshJWT: sshJWT}, nil
}

// sshMaxTokenAge is how old a token agents' SSH servers accept (NetBird's
// servers' default): a login asks for a fresh one.
const sshMaxTokenAge = 10 * time.Minute

// joinUpstream lets package users decide who logs in with an account's
// upstream identity provider.
func joinUpstream(us *users.Service) idp.JoinFunc {
	return func(ctx context.Context, acc account.ID, providerID string, id oidcop.UpstreamIdentity) (account.UserID, error) {
		u, err := us.JoinUpstream(ctx, acc, users.UpstreamLogin{ProviderID: providerID, Subject: id.Subject, Email: id.Email, Name: id.Name,
			EmailVerified: id.EmailVerified})
		return u.ID, err
	}
}

// Mount adds the REST API (/api/), when built in the identity provider
// (under its issuer's path), and the dashboard with its login settings
// (every other path) to mux.
func (s *Server) Mount(mux *http.ServeMux) {
	mux.Handle("/api/", s.REST)
	if s.IdP != nil {
		mux.Handle(issuerPath(s.IdP.Issuer())+"/", s.IdP)
		if issuerPath(s.IdP.Issuer()) == "" {
			// An issuer without a path holds "/" itself: the dashboard
			// then has no path of its own (registering "/" twice would
			// panic), so it is served only with an issuer path such as
			// the default /oauth2.
			return
		}
	}
	mux.Handle("/", s.Dashboard)
}

// openDashboard prepares the dashboard built into the binary (or the page
// saying how to build it) with the login settings of id: the built-in
// provider's dashboard client, or the external provider's.
func openDashboard(id Identity, provider *oidcop.Provider) (*dashboard.Handler, error) {
	o := dashboard.Options{App: dashboard.Embedded()}
	switch {
	case provider != nil:
		o.Config = &dashboard.Config{Issuer: provider.Issuer(), ClientID: idp.DashboardClientID, Audience: idp.DashboardClientID}
		if p := issuerPath(provider.Issuer()); p != "" {
			o.Reserved = []string{p}
		}
	case id.Issuer != "":
		client := id.DashboardClientID
		if client == "" {
			client = id.ClientID
		}
		aud := client
		if len(id.Audiences) > 0 {
			aud = id.Audiences[0]
		}
		o.Config = &dashboard.Config{Issuer: id.Issuer, ClientID: client, Audience: aud}
	}
	return dashboard.New(o)
}

func issuerPath(issuer string) string {
	_, rest, _ := strings.Cut(strings.TrimPrefix(strings.TrimPrefix(issuer, "https://"), "http://"), "/")
	if rest == "" {
		return ""
	}
	return "/" + strings.TrimSuffix(rest, "/")
}

// mfaRequired reports whether a built-in user's account asks for a second
// factor (settings.local_mfa_enabled).
func mfaRequired(st *store.Store) func(ctx context.Context, subject string) (bool, error) {
	return func(ctx context.Context, subject string) (bool, error) {
		var on bool
		err := st.Read(ctx, func(tx *store.Tx) error {
			u, err := tx.UserByID(ctx, account.UserID(subject))
			if err != nil {
				return err
			}
			acc, err := tx.In(u.AccountID).Account(ctx)
			on = err == nil && acc.Settings.LocalMFAEnabled
			return err
		})
		return on, err
	}
}
