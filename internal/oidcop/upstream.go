package oidcop

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"time"

	gooidc "github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// Upstream is an OpenID Connect provider people may log in with instead
// of a password ("Log in with <Name>" on the login page).
type Upstream struct {
	ID, Name, Issuer, ClientID, ClientSecret string
}

// UpstreamIdentity is who an upstream provider vouched for, from its
// verified ID token.
type UpstreamIdentity struct {
	Subject, Email, Name string
	EmailVerified        bool
}

// Upstreams lists the upstream providers and maps the people they vouch
// for to subjects of this provider.
type Upstreams interface {
	// Upstreams lists the providers offered on the login page.
	Upstreams(ctx context.Context) ([]Upstream, error)
	// Upstream finds one.
	Upstream(ctx context.Context, id string) (Upstream, error)
	// Login returns the subject an upstream identity logs in as; an error
	// is shown to the person.
	Login(ctx context.Context, providerID string, id UpstreamIdentity) (subject string, err error)
}

// upstreamLogin is a pending login at an upstream provider, by state.
type upstreamLogin struct {
	requestID, providerID, nonce, verifier string
	browser                                [32]byte // SHA-256 of the browser's cookie
	created                                time.Time
	pending
}

const (
	upstreamPath     = "/upstream"
	upstreamCallback = "/upstream/callback"
	upstreamCookie   = "wm_upstream"
	// upstreamTimeout bounds discovery and the code exchange.
	upstreamTimeout = 15 * time.Second
)

var errUpstream = errors.New("upstream login failed")

func (p *Provider) upstreamRedirect() string { return p.issuer + upstreamCallback }

// upstreamStart sends the browser to an upstream provider for a pending
// login: state and nonce are fresh, PKCE (S256) binds the code to this
// flow and a cookie binds the callback to this browser.
func (p *Provider) upstreamStart(w http.ResponseWriter, r *http.Request) {
	d := pageData{Title: "Log in", Action: p.prefix + loginPath}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if !p.parseForm(w, r, d) {
		return
	}
	reqID, provID := r.Form.Get("authRequestID"), r.Form.Get("idp")
	if _, err := p.st.AuthRequestByID(r.Context(), reqID); err != nil {
		d.Error, d.Message = "This login link has expired. Start the login again from the application.", " "
		render(w, http.StatusNotFound, d)
		return
	}
	d.RequestID = reqID
	up, err := p.upstreams.Upstream(r.Context(), provID)
	if err != nil {
		d.Error = "Unknown identity provider."
		p.renderLogin(w, r, http.StatusNotFound, d)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), upstreamTimeout)
	defer cancel()
	conf, _, err := p.upstreamConfig(ctx, up)
	if err != nil {
		p.log.Warn("upstream provider unreachable", "idp", up.ID, "issuer", up.Issuer, "err", err)
		d.Error = fmt.Sprintf("%s cannot be reached right now; try again or log in with a password.", up.Name)
		p.renderLogin(w, r, http.StatusBadGateway, d)
		return
	}
	cookie := newID()
	l := &upstreamLogin{requestID: reqID, providerID: up.ID, nonce: newID(), verifier: oauth2.GenerateVerifier(),
		browser: sha256.Sum256([]byte(cookie)), created: p.st.now()}
	state := newID()
	if err := p.st.addUpstream(sourceFrom(r.Context()), state, l); err != nil {
		status := http.StatusTooManyRequests
		if errors.Is(err, errAllFull) {
			status = http.StatusServiceUnavailable
		}
		d.Error = err.Error()
		p.renderLogin(w, r, status, d)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: upstreamCookie, Value: cookie, Path: p.prefix + upstreamCallback, HttpOnly: true,
		Secure: r.TLS != nil || p.secure, SameSite: http.SameSiteLaxMode, MaxAge: int(pendingLifetime / time.Second)})
	http.Redirect(w, r, conf.AuthCodeURL(state, gooidc.Nonce(l.nonce), oauth2.S256ChallengeOption(l.verifier)), http.StatusFound)
}

// upstreamConfig discovers an upstream provider.
func (p *Provider) upstreamConfig(ctx context.Context, up Upstream) (*oauth2.Config, *gooidc.Provider, error) {
	prov, err := gooidc.NewProvider(gooidc.ClientContext(ctx, p.httpClient), up.Issuer)
	if err != nil {
		return nil, nil, err
	}
	return &oauth2.Config{ClientID: up.ClientID, ClientSecret: up.ClientSecret, Endpoint: prov.Endpoint(), RedirectURL: p.upstreamRedirect(),
		Scopes: []string{gooidc.ScopeOpenID, "email", "profile"}}, prov, nil
}

// upstreamReturn finishes an upstream login: the state is taken (one use)
// and must come back to the browser that started it, the code is
// exchanged with the PKCE verifier, the ID token verified (issuer,
// audience, expiry, signature, nonce), and the person mapped to a subject.
func (p *Provider) upstreamReturn(w http.ResponseWriter, r *http.Request) {
	d := pageData{Title: "Log in", Action: p.prefix + loginPath}
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", "GET")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	// Not parseForm: an upstream's code may be longer than this
	// provider's own (Entra's are over a kilobyte); the query is bounded
	// by maxQuery.
	if err := r.ParseForm(); err != nil {
		d.Error = "The request could not be read."
		render(w, http.StatusBadRequest, d)
		return
	}
	c, _ := r.Cookie(upstreamCookie)
	l := p.st.takeUpstream(r.Form.Get("state"))
	if l == nil || c == nil {
		d.Error, d.Message = "This login has expired or was already used. Start the login again from the application.", " "
		render(w, http.StatusBadRequest, d)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: upstreamCookie, Path: p.prefix + upstreamCallback, MaxAge: -1})
	d.RequestID = l.requestID
	if sum := sha256.Sum256([]byte(c.Value)); subtle.ConstantTimeCompare(sum[:], l.browser[:]) != 1 {
		d.Error, d.Message = "This login was started in another browser. Start the login again from the application.", " "
		render(w, http.StatusBadRequest, d)
		return
	}
	id, up, err := p.upstreamIdentity(r, l)
	if err != nil {
		p.log.Warn("upstream login failed", "idp", l.providerID, "src", sourceFrom(r.Context()), "err", err)
		d.Error = "Login with the identity provider failed: " + err.Error()
		p.renderLogin(w, r, http.StatusUnauthorized, d)
		return
	}
	subject, err := p.upstreams.Login(r.Context(), up.ID, id)
	if err != nil {
		p.log.Warn("upstream login refused", "idp", up.ID, "email", id.Email, "err", err)
		d.Error = "Login refused: " + err.Error()
		p.renderLogin(w, r, http.StatusForbidden, d)
		return
	}
	if err := p.st.completeLogin(l.requestID, subject); err != nil {
		d.Error, d.Message = "This login link has expired. Start the login again from the application.", " "
		render(w, http.StatusNotFound, d)
		return
	}
	p.log.Info("login", "subject", subject, "email", id.Email, "idp", up.ID)
	http.Redirect(w, r, p.callbackURL(l.requestID), http.StatusFound)
}

func (p *Provider) upstreamIdentity(r *http.Request, l *upstreamLogin) (UpstreamIdentity, Upstream, error) {
	q := r.Form
	if e := q.Get("error"); e != "" {
		return UpstreamIdentity{}, Upstream{}, fmt.Errorf("%w: the provider answered %.64q: %.200s", errUpstream, e, q.Get("error_description"))
	}
	up, err := p.upstreams.Upstream(r.Context(), l.providerID)
	if err != nil {
		return UpstreamIdentity{}, up, fmt.Errorf("%w: the identity provider was removed", errUpstream)
	}
	ctx, cancel := context.WithTimeout(r.Context(), upstreamTimeout)
	defer cancel()
	conf, prov, err := p.upstreamConfig(ctx, up)
	if err != nil {
		return UpstreamIdentity{}, up, fmt.Errorf("%w: the provider cannot be reached: %w", errUpstream, err)
	}
	tok, err := conf.Exchange(gooidc.ClientContext(ctx, p.httpClient), q.Get("code"), oauth2.VerifierOption(l.verifier))
	if err != nil {
		return UpstreamIdentity{}, up, fmt.Errorf("%w: the code exchange failed: %w", errUpstream, err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return UpstreamIdentity{}, up, fmt.Errorf("%w: the provider returned no ID token", errUpstream)
	}
	idt, err := prov.Verifier(&gooidc.Config{ClientID: up.ClientID, Now: p.st.now}).Verify(ctx, raw)
	if err != nil {
		return UpstreamIdentity{}, up, fmt.Errorf("%w: the ID token is not valid: %w", errUpstream, err)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(l.nonce)) != 1 {
		return UpstreamIdentity{}, up, fmt.Errorf("%w: the ID token's nonce does not match", errUpstream)
	}
	var claims struct {
		Email         string `json:"email"`
		EmailVerified any    `json:"email_verified"`
		Name          string `json:"name"`
	}
	if err := idt.Claims(&claims); err != nil {
		return UpstreamIdentity{}, up, fmt.Errorf("%w: the ID token's claims: %w", errUpstream, err)
	}
	// Some providers send email_verified as a string.
	verified := claims.EmailVerified == true || claims.EmailVerified == "true"
	return UpstreamIdentity{Subject: idt.Subject, Email: claims.Email, Name: claims.Name, EmailVerified: verified}, up, nil
}

// addUpstream holds a pending upstream login, charged to its source like
// any pending login; one per login request (a second replaces the first).
func (s *storage) addUpstream(src netip.Addr, state string, l *upstreamLogin) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for st, o := range s.upstream {
		if o.requestID == l.requestID {
			s.dropUpstream(st, o)
		}
	}
	n := entryOverhead + len(state) + len(l.requestID) + len(l.providerID) + len(l.nonce) + len(l.verifier) + len(l.browser)
	if err := s.admit(src, n); err != nil {
		return err
	}
	l.pending = pending{src: src, bytes: n}
	s.upstream[state] = l
	return nil
}

// takeUpstream removes and returns the pending upstream login of state,
// nil when there is none or it expired.
func (s *storage) takeUpstream(state string) *upstreamLogin {
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.upstream[state]
	if !ok {
		return nil
	}
	s.dropUpstream(state, l)
	if s.now().Sub(l.created) > pendingLifetime {
		return nil
	}
	return l
}

// dropUpstream forgets a pending upstream login (s.mu held).
func (s *storage) dropUpstream(state string, l *upstreamLogin) {
	delete(s.upstream, state)
	s.uncharge(l.pending)
}

// upstreamButtons are the providers offered on the login page; a failure
// to list them leaves the password form.
func (p *Provider) upstreamButtons(r *http.Request, requestID string) []loginButton {
	if p.upstreams == nil || requestID == "" {
		return nil
	}
	ups, err := p.upstreams.Upstreams(r.Context())
	if err != nil {
		p.log.Error("listing identity providers failed", "err", err)
		return nil
	}
	out := make([]loginButton, 0, len(ups))
	for _, u := range ups {
		out = append(out, loginButton{Name: u.Name,
			URL: p.prefix + upstreamPath + "?" + url.Values{"authRequestID": {requestID}, "idp": {u.ID}}.Encode()})
	}
	return out
}
