package server_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestUpstreamIdPThroughREST: an owner adds a second OpenID Connect
// provider (run in-process on loopback) through /api/identity-providers;
// a person of that provider logs in on the built-in provider's page with
// its button, through real HTTP (cookie jar, the upstream's login form):
// the first login leaves a user pending approval, and once the owner
// approves it (POST /api/users/{id}/approve) the built-in token works on
// the REST API as the new user. A refresh
// gives a new one; end-session ends it.
func TestUpstreamIdPThroughREST(t *testing.T) { engines.Each(t, testUpstreamIdPThroughREST) }

func testUpstreamIdPThroughREST(t *testing.T, eng storetest.Engine) {
	const dash = "http://dashboard.test/nb-auth"
	e := startOn(t, eng, server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer, DashboardRedirects: []string{dash},
		// The upstream runs on loopback, which the server refuses to reach by default.
		UpstreamAllow: idp.UpstreamAllow{CIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}}})
	issuer := "http://" + e.addr + "/oauth2"
	up := testoidc.StartWithRedirects(t, "", []string{issuer + "/upstream/callback"},
		testoidc.User{Subject: "u-dana", Email: "dana@corp.example", Name: "Dana", Password: "Dana-passw0rd!"})
	setup := obj(e.api("").call("POST", "/api/setup", map[string]any{"email": "owner@example.com", "password": "Owner-passw0rd!", "name": "Owner", "create_pat": true}, 200))
	owner := e.api("Token " + setup["personal_access_token"].(string))
	owner.call("POST", "/api/identity-providers", map[string]any{"type": "oidc", "name": "Corp", "issuer": up.URL, "client_id": testoidc.ClientID}, 200)

	conf := &oauth2.Config{ClientID: idp.DashboardClientID, RedirectURL: dash, Scopes: []string{"openid", "profile", "email", "offline_access"},
		Endpoint: oauth2.Endpoint{AuthURL: issuer + "/authorize", TokenURL: issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	jar, _ := cookiejar.New(nil)
	var back *url.URL
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Host == "dashboard.test" {
			back = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	get := func(u string) (*http.Response, string) {
		resp, err := c.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	// login runs the browser's login with the Corp button; it returns the
	// built-in provider's token, or nil and the page the login ended on.
	login := func() (*oauth2.Token, string) {
		verifier := oauth2.GenerateVerifier()
		_, page := get(conf.AuthCodeURL("xyz", oauth2.S256ChallengeOption(verifier)))
		m := regexp.MustCompile(`<a class="idp" href="([^"]+)">Log in with Corp</a>`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("no Corp button on the login page:\n%s", page)
		}
		resp, _ := get("http://" + e.addr + html.UnescapeString(m[1]))
		form := resp.Request.URL
		post := *form
		post.RawQuery = ""
		back = nil
		resp, err := c.PostForm(post.String(), url.Values{"authRequestID": {form.Query().Get("authRequestID")}, "email": {"dana@corp.example"}, "password": {"Dana-passw0rd!"}})
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if back == nil {
			return nil, resp.Status + " " + string(body)
		}
		if back.Query().Get("state") != "xyz" {
			t.Fatalf("login returned to the dashboard with %v", back)
		}
		tok, err := conf.Exchange(context.Background(), back.Query().Get("code"), oauth2.VerifierOption(verifier))
		if err != nil {
			t.Fatal(err)
		}
		return tok, ""
	}
	// The first login makes a user pending approval; an admin approves it.
	if tok, page := login(); tok != nil || !strings.HasPrefix(page, "403") || !strings.Contains(page, "pending approval") {
		t.Fatalf("first upstream login: %v, want pending approval:\n%s", tok, page)
	}
	var dana map[string]any
	for _, u := range list(owner.call("GET", "/api/users", nil, 200)) {
		if obj(u)["email"] == "dana@corp.example" {
			dana = obj(u)
		}
	}
	if dana == nil || dana["pending_approval"] != true || dana["role"] != "user" {
		t.Fatalf("upstream user before approval: %v", dana)
	}
	owner.call("POST", "/api/users/"+url.PathEscape(dana["id"].(string))+"/approve", nil, 200)
	tok, page := login()
	if tok == nil {
		t.Fatalf("approved user's upstream login:\n%s", page)
	}
	me := obj(e.api("Bearer "+tok.AccessToken).call("GET", "/api/users/current", nil, 200))
	if me["email"] != "dana@corp.example" || me["role"] != "user" {
		t.Fatalf("current user with the upstream login's token: %v", me)
	}
	// The secret-less provider is listed without a secret field.
	if l := list(owner.call("GET", "/api/identity-providers", nil, 200)); len(l) != 1 || obj(l[0])["client_secret"] != nil {
		t.Fatalf("identity providers: %v", l)
	}

	// A refresh gives a working token; logout ends the refresh token.
	fresh, err := conf.TokenSource(context.Background(), &oauth2.Token{RefreshToken: tok.RefreshToken}).Token()
	if err != nil || fresh.AccessToken == tok.AccessToken {
		t.Fatalf("refresh: %v", err)
	}
	e.api("Bearer "+fresh.AccessToken).call("GET", "/api/users/current", nil, 200)
	idt, _ := tok.Extra("id_token").(string)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noFollow.Get(issuer + "/end_session?" + url.Values{"id_token_hint": {idt}, "post_logout_redirect_uri": {"http://dashboard.test/"}}.Encode())
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "http://dashboard.test/" {
		t.Fatalf("end session: %s %q", resp.Status, resp.Header.Get("Location"))
	}
	if _, err := conf.TokenSource(context.Background(), &oauth2.Token{RefreshToken: fresh.RefreshToken}).Token(); err == nil || !strings.Contains(err.Error(), "invalid_grant") {
		t.Fatalf("refresh after logout: %v", err)
	}
	e.api("Bearer "+fresh.AccessToken).call("GET", "/api/users/current", nil, 401)
}
