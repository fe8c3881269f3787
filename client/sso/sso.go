// Package sso runs the OAuth 2.0 logins a management server describes
// (GetPKCEAuthorizationFlow, GetDeviceAuthorizationFlow): the device
// authorization flow of RFC 8628, which prints a URL and a code and works
// over SSH, and the authorization-code flow with PKCE and a loopback
// callback for machines with a browser. It returns the token to present in
// Login; it does not talk to management itself.
package sso

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Prompt is what the person logging in must see.
type Prompt struct {
	VerificationURI         string // where to go
	VerificationURIComplete string // the same with the code filled in (device flow) or the full login URL (PKCE)
	UserCode                string // the code to confirm (device flow); an opaque ID for PKCE
}

// Flow is a login in progress.
type Flow interface {
	Prompt() Prompt
	// Wait blocks until the person logged in (or ctx ends) and returns
	// the token to present to management.
	Wait(ctx context.Context) (Token, error)
	// Close abandons the flow and frees its resources.
	Close()
}

// Token is the outcome of a flow.
type Token struct {
	JWT   string // what Login's jwtToken carries
	Email string // for display, read from the token without verifying it
}

func oauthConfig(pc *mgmtpb.ProviderConfig) *oauth2.Config {
	scope := pc.GetScope()
	if scope == "" {
		scope = "openid"
	}
	return &oauth2.Config{ClientID: pc.GetClientID(), ClientSecret: pc.GetClientSecret(), Scopes: strings.Fields(scope),
		Endpoint: oauth2.Endpoint{AuthURL: pc.GetAuthorizationEndpoint(), TokenURL: pc.GetTokenEndpoint(),
			DeviceAuthURL: pc.GetDeviceAuthEndpoint(), AuthStyle: oauth2.AuthStyleInParams}}
}

func audience(pc *mgmtpb.ProviderConfig) []oauth2.AuthCodeOption {
	if pc.GetAudience() == "" {
		return nil
	}
	return []oauth2.AuthCodeOption{oauth2.SetAuthURLParam("audience", pc.GetAudience())}
}

// pick chooses the token management wants.
func pick(pc *mgmtpb.ProviderConfig, t *oauth2.Token) (Token, error) {
	raw := t.AccessToken
	if pc.GetUseIDToken() {
		id, _ := t.Extra("id_token").(string)
		if id == "" {
			return Token{}, errors.New("the identity provider returned no ID token")
		}
		raw = id
	}
	return Token{JWT: raw, Email: emailOf(raw)}, nil
}

// emailOf reads the email claim of a JWT without verifying it (display only).
func emailOf(jwt string) string {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return ""
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return ""
	}
	var c struct {
		Email string `json:"email"`
	}
	_ = json.Unmarshal(b, &c)
	return c.Email
}

// CheckDevice validates a device flow configuration as the official client does.
func CheckDevice(pc *mgmtpb.ProviderConfig) error {
	if pc.GetClientID() == "" || pc.GetTokenEndpoint() == "" || pc.GetDeviceAuthEndpoint() == "" {
		return errors.New("the server's device login configuration is incomplete (client ID, token or device endpoint missing)")
	}
	return nil
}

// CheckPKCE validates a PKCE flow configuration as the official client does.
func CheckPKCE(pc *mgmtpb.ProviderConfig) error {
	if pc.GetClientID() == "" || pc.GetTokenEndpoint() == "" || pc.GetAuthorizationEndpoint() == "" || len(pc.GetRedirectURLs()) == 0 {
		return errors.New("the server's browser login configuration is incomplete (client ID, endpoints or redirect URLs missing)")
	}
	return nil
}

// --- device flow ---

type deviceFlow struct {
	pc  *mgmtpb.ProviderConfig
	cfg *oauth2.Config
	da  *oauth2.DeviceAuthResponse
}

// StartDevice asks the provider for a device code.
func StartDevice(ctx context.Context, pc *mgmtpb.ProviderConfig) (Flow, error) {
	if err := CheckDevice(pc); err != nil {
		return nil, err
	}
	cfg := oauthConfig(pc)
	da, err := cfg.DeviceAuth(ctx, audience(pc)...)
	if err != nil {
		return nil, fmt.Errorf("device login at %s: %w", pc.GetDeviceAuthEndpoint(), err)
	}
	return &deviceFlow{pc: pc, cfg: cfg, da: da}, nil
}

func (f *deviceFlow) Prompt() Prompt {
	return Prompt{VerificationURI: f.da.VerificationURI, VerificationURIComplete: f.da.VerificationURIComplete, UserCode: f.da.UserCode}
}

func (f *deviceFlow) Wait(ctx context.Context) (Token, error) {
	t, err := f.cfg.DeviceAccessToken(ctx, f.da, audience(f.pc)...)
	if err != nil {
		return Token{}, fmt.Errorf("device login: %w", err)
	}
	return pick(f.pc, t)
}

func (f *deviceFlow) Close() {}

// --- authorization code with PKCE ---

type pkceFlow struct {
	pc       *mgmtpb.ProviderConfig
	cfg      *oauth2.Config
	verifier string
	state    string
	authURL  string
	srv      *http.Server
	done     chan struct{}

	mu   sync.Mutex
	code string
	err  error
}

// StartPKCE listens on the first free loopback redirect URL the server
// lists and returns the flow; the person opens Prompt().VerificationURIComplete.
func StartPKCE(ctx context.Context, pc *mgmtpb.ProviderConfig) (Flow, error) {
	if err := CheckPKCE(pc); err != nil {
		return nil, err
	}
	var (
		ln       net.Listener
		redirect *url.URL
		lastErr  error
	)
	for _, r := range pc.GetRedirectURLs() {
		u, err := url.Parse(r)
		if err != nil || u.Scheme != "http" {
			lastErr = fmt.Errorf("redirect URL %q is not a local http URL", r)
			continue
		}
		host := u.Hostname()
		if host == "localhost" {
			host = "127.0.0.1"
		}
		if ln, err = (&net.ListenConfig{}).Listen(ctx, "tcp", net.JoinHostPort(host, u.Port())); err == nil {
			redirect = u
			break
		}
		lastErr = err
	}
	if ln == nil {
		return nil, fmt.Errorf("no redirect URL could be listened on: %w", lastErr)
	}
	cfg := oauthConfig(pc)
	cfg.RedirectURL = redirect.String()
	f := &pkceFlow{pc: pc, cfg: cfg, verifier: oauth2.GenerateVerifier(), state: randomState(), done: make(chan struct{})}
	opts := append(audience(pc), oauth2.S256ChallengeOption(f.verifier))
	switch pc.GetLoginFlag() {
	case 0:
		opts = append(opts, oauth2.SetAuthURLParam("prompt", "login"))
	case 1:
		opts = append(opts, oauth2.SetAuthURLParam("max_age", "0"))
	}
	f.authURL = cfg.AuthCodeURL(f.state, opts...)
	mux := http.NewServeMux()
	mux.HandleFunc(path(redirect), f.callback)
	f.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func path(u *url.URL) string {
	if u.Path == "" {
		return "/"
	}
	return u.Path
}

func randomState() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func (f *pkceFlow) callback(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if q.Get("state") != f.state {
		http.Error(w, "unexpected login state; start the login again", http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	first := f.code == "" && f.err == nil
	if first {
		if e := q.Get("error"); e != "" {
			f.err = fmt.Errorf("the identity provider refused the login: %s %s", e, q.Get("error_description"))
		} else if f.code = q.Get("code"); f.code == "" {
			f.err = errors.New("the identity provider returned no code")
		}
	}
	err := f.err
	f.mu.Unlock()
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err != nil {
		fmt.Fprintf(w, "<!doctype html><title>Login failed</title><p>Login failed: %s</p>", html.EscapeString(err.Error()))
	} else {
		fmt.Fprint(w, "<!doctype html><title>Logged in</title><p>Login successful. You can close this window.</p>")
	}
	if first {
		close(f.done)
	}
}

func (f *pkceFlow) Prompt() Prompt {
	return Prompt{VerificationURI: f.authURL, VerificationURIComplete: f.authURL, UserCode: f.state}
}

func (f *pkceFlow) Wait(ctx context.Context) (Token, error) {
	defer f.Close()
	select {
	case <-ctx.Done():
		return Token{}, ctx.Err()
	case <-f.done:
	}
	f.mu.Lock()
	code, err := f.code, f.err
	f.mu.Unlock()
	if err != nil {
		return Token{}, err
	}
	t, err := f.cfg.Exchange(ctx, code, oauth2.VerifierOption(f.verifier))
	if err != nil {
		return Token{}, fmt.Errorf("browser login: %w", err)
	}
	return pick(f.pc, t)
}

func (f *pkceFlow) Close() { _ = f.srv.Close() }
