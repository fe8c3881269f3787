package idp_test

import (
	"context"
	"crypto"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type nopNotifier struct{}

func (nopNotifier) AccountChanged(account.ID) {}

// dashboardRedirect is on another host than the provider, so that a
// browser-like login stops there without fetching it.
const dashboardRedirect = "http://dashboard.test/nb-auth"

// rig is the built-in provider on a real SQLite store, served over HTTP,
// with a clock the test moves.
type rig struct {
	t        *testing.T
	st       *store.Store
	us       *users.Service
	p        *oidcop.Provider
	url      string // the server's base URL
	clk      *clock
	owner    account.User
	verifier *auth.Verifier
}

func newRig(t *testing.T, opts ...func(*idp.Options)) *rig {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Engine: store.SQLite, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	clk := &clock{t: time.Now().UTC()}
	r := &rig{t: t, st: st, clk: clk}
	var h http.Handler = http.NotFoundHandler()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { h.ServeHTTP(w, req) }))
	t.Cleanup(srv.Close)
	r.url = srv.URL
	r.us = users.New(users.Options{Store: st, LocalIdP: true, Notify: nopNotifier{}, Now: clk.Now})
	join := func(ctx context.Context, acc account.ID, providerID string, id oidcop.UpstreamIdentity) (account.UserID, error) {
		u, err := r.us.JoinUpstream(ctx, acc, users.UpstreamLogin{ProviderID: providerID, Subject: id.Subject, Email: id.Email, Name: id.Name,
			EmailVerified: id.EmailVerified})
		return u.ID, err
	}
	o := idp.Options{Issuer: srv.URL + "/oauth2", DashboardRedirects: []string{dashboardRedirect}, Now: clk.Now, Join: join}
	for _, f := range opts {
		f(&o)
	}
	r.p, err = idp.New(ctx, st, o)
	if err != nil {
		t.Fatal(err)
	}
	h = r.p
	if r.owner, _, err = r.us.Setup(ctx, users.SetupInput{Email: "owner@example.com", Password: "Owner-passw0rd!", Name: "Owner"}); err != nil {
		t.Fatal(err)
	}
	pub, _ := r.p.PublicKey()
	r.verifier, err = auth.NewVerifier(auth.JWTConfig{Issuer: r.p.Issuer(), Audiences: []string{idp.DashboardClientID, idp.AgentClientID},
		KeySet: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{pub}}, Now: clk.Now, ClockSkew: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// person creates a user with a local login and returns it with its
// generated password.
func (r *rig) person(email string) (account.User, string) {
	r.t.Helper()
	u, pw, err := r.us.Create(context.Background(), r.owner, users.CreateInput{Email: email, Name: email, Role: account.RoleUser})
	if err != nil {
		r.t.Fatal(err)
	}
	return u, pw
}

func (r *rig) oauth(scopes ...string) *oauth2.Config {
	ep := r.p.Endpoints()
	return &oauth2.Config{ClientID: idp.DashboardClientID, RedirectURL: dashboardRedirect, Scopes: scopes,
		Endpoint: oauth2.Endpoint{AuthURL: ep.Authorization, TokenURL: ep.Token, AuthStyle: oauth2.AuthStyleInParams}}
}

// login runs the browser PKCE flow of the dashboard client.
func (r *rig) login(email, password string, scopes ...string) *oauth2.Token {
	r.t.Helper()
	if len(scopes) == 0 {
		scopes = []string{"openid", "profile", "email", "offline_access"}
	}
	conf := r.oauth(scopes...)
	verifier := oauth2.GenerateVerifier()
	back := testoidc.BrowserLogin(r.t, conf.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier)), email, password)
	if back.Query().Get("state") != "st4te" || back.Query().Get("code") == "" {
		r.t.Fatalf("login returned %s", back)
	}
	tok, err := conf.Exchange(context.Background(), back.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		r.t.Fatalf("code exchange: %v", err)
	}
	return tok
}

// refresh posts the refresh_token grant and returns the status and body.
func (r *rig) refresh(rt string) (int, map[string]any) {
	r.t.Helper()
	return r.post(r.p.Endpoints().Token, url.Values{"grant_type": {"refresh_token"}, "client_id": {idp.DashboardClientID}, "refresh_token": {rt}})
}

func (r *rig) post(to string, form url.Values) (int, map[string]any) {
	r.t.Helper()
	resp, err := http.PostForm(to, form)
	if err != nil {
		r.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	m := map[string]any{}
	_ = json.Unmarshal(body, &m)
	return resp.StatusCode, m
}

func (r *rig) mustRefresh(rt string) (access, next string) {
	r.t.Helper()
	code, body := r.refresh(rt)
	access, _ = body["access_token"].(string)
	next, _ = body["refresh_token"].(string)
	if code != http.StatusOK || access == "" || next == "" {
		r.t.Fatalf("refresh: %d %v", code, body)
	}
	return access, next
}

func (r *rig) refused(rt, why string) {
	r.t.Helper()
	if code, body := r.refresh(rt); code != http.StatusBadRequest || body["error"] != "invalid_grant" {
		r.t.Fatalf("%s: refresh answered %d %v, want 400 invalid_grant", why, code, body)
	}
}

func (r *rig) verify(access string) (auth.Claims, error) {
	return r.verifier.Verify(context.Background(), access)
}

func (r *rig) revoked(jti string) bool {
	r.t.Helper()
	var rev bool
	err := r.st.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		rev, err = tx.AccessTokenRevoked(context.Background(), jti)
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return rev
}

func (r *rig) refreshRows(subject account.UserID) int {
	r.t.Helper()
	var n int
	err := r.st.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		n, err = tx.CountRefreshTokens(context.Background(), string(subject))
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return n
}

// TestRefreshAcrossExpiry: a dashboard login with offline_access gets a
// refresh token that outlives its access token; each use rotates it.
func TestRefreshAcrossExpiry(t *testing.T) {
	r := newRig(t)
	u, pw := r.person("alice@example.com")
	tok := r.login(u.Email, pw)
	if tok.RefreshToken == "" {
		t.Fatal("no refresh token for a login with offline_access")
	}
	if c, err := r.verify(tok.AccessToken); err != nil || c.Subject != string(u.ID) {
		t.Fatalf("fresh access token: %v %v", c, err)
	}
	// Without offline_access there is no refresh token.
	if plain := r.login(u.Email, pw, "openid", "email"); plain.RefreshToken != "" {
		t.Fatal("refresh token issued without offline_access")
	}

	r.clk.Add(2 * time.Hour) // the access token (one hour) has expired
	if _, err := r.verify(tok.AccessToken); err == nil {
		t.Fatal("access token still accepted after its expiry")
	}
	access, next := r.mustRefresh(tok.RefreshToken)
	c, err := r.verify(access)
	if err != nil || c.Subject != string(u.ID) || c.Email != u.Email {
		t.Fatalf("refreshed access token: %+v %v", c, err)
	}
	if next == tok.RefreshToken {
		t.Fatal("refresh token not rotated")
	}
	// Rotated again, two weeks of regular use later.
	for range 3 {
		r.clk.Add(5 * 24 * time.Hour)
		_, next = r.mustRefresh(next)
	}
	// Idle past its lifetime, a refresh token is dead.
	r.clk.Add(15 * 24 * time.Hour)
	r.refused(next, "idle refresh token")
	// Garbage and another client's use are refused.
	r.refused("wmrt_garbage", "unknown token")
	other := r.login(u.Email, pw)
	code, body := r.post(r.p.Endpoints().Token, url.Values{"grant_type": {"refresh_token"}, "client_id": {idp.AgentClientID}, "refresh_token": {other.RefreshToken}})
	if code != http.StatusBadRequest {
		t.Fatalf("another client's refresh token: %d %v", code, body)
	}
	r.mustRefresh(other.RefreshToken)
}

// TestRefreshReuse: a rotated token presented again revokes its login:
// the current token and the access tokens issued from it stop working.
func TestRefreshReuse(t *testing.T) {
	r := newRig(t)
	u, pw := r.person("bob@example.com")
	tok := r.login(u.Email, pw)
	access, next := r.mustRefresh(tok.RefreshToken)
	c, err := r.verify(access)
	if err != nil {
		t.Fatal(err)
	}
	bystander := r.login(u.Email, pw) // another login of the same user survives

	r.refused(tok.RefreshToken, "reused token")
	r.refused(next, "current token of a reused family")
	if !r.revoked(c.TokenID) {
		t.Fatal("the access token of a reused family was not revoked")
	}
	r.mustRefresh(bystander.RefreshToken)
}

// TestRefreshRevocation: the revocation endpoint, end-session (logout),
// blocking and deleting a user end refresh tokens.
func TestRefreshRevocation(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	u, pw := r.person("carol@example.com")
	ep := r.p.Endpoints()

	{ // revocation endpoint
		tok := r.login(u.Email, pw)
		access, rt := r.mustRefresh(tok.RefreshToken)
		c, _ := r.verify(access)
		// Another client cannot revoke it (it is silently ignored).
		if code, _ := r.post(strings.TrimSuffix(ep.Issuer, "/")+"/revoke", url.Values{"client_id": {idp.AgentClientID}, "token": {rt}}); code != http.StatusOK {
			t.Fatalf("revoke by another client: %d", code)
		}
		_, rt = r.mustRefresh(rt)
		if code, body := r.post(strings.TrimSuffix(ep.Issuer, "/")+"/revoke", url.Values{"client_id": {idp.DashboardClientID}, "token": {rt}}); code != http.StatusOK {
			t.Fatalf("revoke: %d %v", code, body)
		}
		r.refused(rt, "revoked token")
		if !r.revoked(c.TokenID) {
			t.Fatal("access token of a revoked refresh token still valid")
		}
	}

	{ // end session
		tok := r.login(u.Email, pw)
		idt, _ := tok.Extra("id_token").(string)
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		end := strings.TrimSuffix(ep.Issuer, "/") + "/end_session"
		get := func(q url.Values) *http.Response {
			resp, err := noFollow.Get(end + "?" + q.Encode())
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp
		}
		// An unregistered post-logout URI is refused, and logs nobody out.
		if resp := get(url.Values{"id_token_hint": {idt}, "post_logout_redirect_uri": {"https://evil.example/"}}); resp.StatusCode < 400 {
			t.Fatalf("unregistered post_logout_redirect_uri: %s %s", resp.Status, resp.Header.Get("Location"))
		}
		tok2 := r.login(u.Email, pw)
		_, rt := r.mustRefresh(tok2.RefreshToken)
		resp := get(url.Values{"id_token_hint": {idt}, "post_logout_redirect_uri": {"http://dashboard.test/"}, "state": {"s1"}})
		if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://dashboard.test/?state=s1" {
			t.Fatalf("logout: %s to %q", resp.Status, resp.Header.Get("Location"))
		}
		r.refused(rt, "refresh token after logout")
		r.refused(tok.RefreshToken, "refresh token after logout")
		// The server's base URL is registered too; without a URI the
		// provider's own page is shown.
		if resp := get(url.Values{"client_id": {idp.DashboardClientID}, "post_logout_redirect_uri": {r.url}}); resp.Header.Get("Location") != r.url {
			t.Fatalf("logout to the base URL: %s %q", resp.Status, resp.Header.Get("Location"))
		}
		if resp := get(url.Values{"id_token_hint": {idt}}); !strings.HasSuffix(resp.Header.Get("Location"), "/oauth2/logged-out") {
			t.Fatalf("logout without a URI: %s %q", resp.Status, resp.Header.Get("Location"))
		}
	}

	{ // block and delete
		tok := r.login(u.Email, pw)
		if _, err := r.us.Update(ctx, r.owner, u.ID, users.UpdateInput{Role: account.RoleUser, Blocked: true}); err != nil {
			t.Fatal(err)
		}
		r.refused(tok.RefreshToken, "blocked user")
		if n := r.refreshRows(u.ID); n != 0 {
			t.Fatalf("%d refresh tokens left of a blocked user", n)
		}
		if _, err := r.us.Update(ctx, r.owner, u.ID, users.UpdateInput{Role: account.RoleUser}); err != nil {
			t.Fatal(err)
		}
		tok = r.login(u.Email, pw)
		if err := r.us.Delete(ctx, r.owner, u.ID); err != nil {
			t.Fatal(err)
		}
		r.refused(tok.RefreshToken, "deleted user")
		if n := r.refreshRows(u.ID); n != 0 {
			t.Fatalf("%d refresh tokens left of a deleted user", n)
		}
	}
}

// TestRefreshCap: a user keeps at most so many logins with refresh
// tokens; a new one past the cap ends the oldest.
func TestRefreshCap(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()
	rs := idp.RefreshStore{Store: r.st}
	now := r.clk.Now()
	tok := func(i int) oidcop.RefreshToken {
		return oidcop.RefreshToken{Hash: oidcop.HashRefreshToken(string(rune('a' + i))), Family: "f" + string(rune('a'+i)), Subject: "s", ClientID: "c",
			Created: now.Add(time.Duration(i) * time.Second), Expires: now.Add(time.Hour), FamilyExpires: now.Add(time.Hour)}
	}
	for i := range 5 {
		if err := rs.Start(ctx, tok(i), 3, now); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		_, err := rs.ByHash(ctx, tok(i).Hash)
		if (err == nil) != (i >= 2) {
			t.Errorf("family %d: kept=%v, want the newest 3 kept", i, err == nil)
		}
	}
	// Rotation keeps a bounded history per family.
	cur := tok(4)
	for i := range 40 {
		next := cur
		next.Hash = oidcop.HashRefreshToken("r" + string(rune('a'+i)))
		next.Created = now.Add(time.Duration(10+i) * time.Second)
		if err := rs.Rotate(ctx, cur.Hash, next, next.Created); err != nil {
			t.Fatal(err)
		}
		cur = next
	}
	if err := rs.Rotate(ctx, tok(4).Hash, cur, now); err != oidcop.ErrRefreshNotCurrent {
		t.Fatalf("rotating a used token: %v", err)
	}
	if n := r.refreshRows("s"); n != 2+1+16 {
		t.Fatalf("%d rows for 3 families, want 19 (two, the current one and 16 rotated)", n)
	}
}

// TestAgentDeviceRefresh: an agent's device-flow login with offline_access
// gets a refresh token of the agent's client, which rotates like the
// dashboard's.
func TestAgentDeviceRefresh(t *testing.T) {
	r := newRig(t)
	u, pw := r.person("agent-user@example.com")
	ep := r.p.Endpoints()
	code, dev := r.post(ep.DeviceAuthorization, url.Values{"client_id": {idp.AgentClientID}, "scope": {"openid email offline_access"}})
	if code != http.StatusOK {
		t.Fatalf("device authorization: %d %v", code, dev)
	}
	if err := testoidc.ApproveDevice(nil, dev["verification_uri"].(string), dev["user_code"].(string), u.Email, pw); err != nil {
		t.Fatal(err)
	}
	code, tok := r.post(ep.Token, url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:device_code"}, "client_id": {idp.AgentClientID},
		"device_code": {dev["device_code"].(string)}})
	rt, _ := tok["refresh_token"].(string)
	if code != http.StatusOK || rt == "" {
		t.Fatalf("device token: %d %v", code, tok)
	}
	code, next := r.post(ep.Token, url.Values{"grant_type": {"refresh_token"}, "client_id": {idp.AgentClientID}, "refresh_token": {rt}})
	if code != http.StatusOK || next["refresh_token"] == rt || next["access_token"] == nil {
		t.Fatalf("agent refresh: %d %v", code, next)
	}
	c, err := r.verify(next["access_token"].(string))
	if err != nil || c.Subject != string(u.ID) {
		t.Fatalf("agent's refreshed token: %+v %v", c, err)
	}
	// The dashboard client cannot use the agent's token.
	r.refused(next["refresh_token"].(string), "agent token at the dashboard client")
}
