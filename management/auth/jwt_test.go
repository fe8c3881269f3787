package auth_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"errors"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/management/auth"
)

var alice = testoidc.User{Subject: "alice-sub|1", Email: "alice@example.com", Name: "Alice", Password: "correct horse", Groups: []string{"devs", "ops"}}

func verifier(t *testing.T, p *testoidc.Provider) *auth.Verifier {
	t.Helper()
	v, err := auth.NewVerifier(auth.JWTConfig{Issuer: p.URL, Audiences: []string{testoidc.ClientID}})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// deviceToken runs the device flow against the provider as an agent does,
// approving it through the provider's pages as a person does.
func deviceToken(t *testing.T, p *testoidc.Provider, email, password string) *oauth2.Token {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep := p.Endpoints()
	cfg := &oauth2.Config{ClientID: testoidc.ClientID, Scopes: []string{"openid", "email", "profile"},
		Endpoint: oauth2.Endpoint{DeviceAuthURL: ep.DeviceAuthorization, TokenURL: ep.Token, AuthStyle: oauth2.AuthStyleInParams}}
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	if da.UserCode == "" || !strings.HasPrefix(da.VerificationURI, p.URL) {
		t.Fatalf("device authorization response: %+v", da)
	}
	if err := testoidc.ApproveDevice(nil, da.VerificationURI, da.UserCode, email, password); err != nil {
		t.Fatal(err)
	}
	da.Interval = 1
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatalf("device token: %v", err)
	}
	// A device code is good for one set of tokens.
	if _, err := cfg.DeviceAccessToken(ctx, da); err == nil {
		t.Fatal("device code exchanged twice")
	}
	return tok
}

func TestVerifyDeviceFlowToken(t *testing.T) {
	p := testoidc.Start(t, "", alice)
	tok := deviceToken(t, p, alice.Email, alice.Password)
	c, err := verifier(t, p).Verify(context.Background(), tok.AccessToken)
	if err != nil {
		t.Fatalf("verify access token: %v", err)
	}
	if c.Subject != alice.Subject || c.Email != alice.Email || c.Name != alice.Name || strings.Join(c.Groups, ",") != "devs,ops" {
		t.Fatalf("claims %+v", c)
	}
}

func TestWrongPasswordDoesNotApprove(t *testing.T) {
	p := testoidc.Start(t, "", alice)
	ep := p.Endpoints()
	cfg := &oauth2.Config{ClientID: testoidc.ClientID, Scopes: []string{"openid"},
		Endpoint: oauth2.Endpoint{DeviceAuthURL: ep.DeviceAuthorization, TokenURL: ep.Token, AuthStyle: oauth2.AuthStyleInParams}}
	da, err := cfg.DeviceAuth(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := testoidc.ApproveDevice(nil, da.VerificationURI, da.UserCode, alice.Email, "wrong"); err == nil {
		t.Fatal("wrong password approved the device")
	}
	if err := testoidc.ApproveDevice(nil, da.VerificationURI, "BCDF-GHJK", alice.Email, alice.Password); err == nil {
		t.Fatal("unknown user code approved")
	}
}

func TestPKCEFlowToken(t *testing.T) {
	p := testoidc.Start(t, "", alice)
	ep := p.Endpoints()
	cfg := &oauth2.Config{ClientID: testoidc.ClientID, Scopes: []string{"openid", "email"}, RedirectURL: "http://localhost:53117/",
		Endpoint: oauth2.Endpoint{AuthURL: ep.Authorization, TokenURL: ep.Token, AuthStyle: oauth2.AuthStyleInParams}}
	verifierStr := oauth2.GenerateVerifier()
	url := cfg.AuthCodeURL("state-1", oauth2.S256ChallengeOption(verifierStr))
	back := testoidc.BrowserLogin(t, url, alice.Email, alice.Password)
	if back.Host != "localhost:53117" || back.Query().Get("state") != "state-1" || back.Query().Get("code") == "" {
		t.Fatalf("callback %s", back)
	}
	ctx := context.Background()
	if _, err := cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption("not-the-verifier-"+verifierStr)); err == nil {
		t.Fatal("code exchanged with a wrong PKCE verifier")
	}
	back = testoidc.BrowserLogin(t, cfg.AuthCodeURL("state-2", oauth2.S256ChallengeOption(verifierStr)), alice.Email, alice.Password)
	tok, err := cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifierStr))
	if err != nil {
		t.Fatalf("exchange: %v", err)
	}
	if _, err := verifier(t, p).Verify(ctx, tok.AccessToken); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if _, err := cfg.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifierStr)); err == nil {
		t.Fatal("code exchanged twice")
	}
}

func TestBadTokensRefused(t *testing.T) {
	p := testoidc.Start(t, "", alice)
	other := testoidc.Start(t, "")
	v := verifier(t, p)
	ctx := context.Background()
	good := p.Mint(t, map[string]any{"sub": alice.Subject, "email": alice.Email})
	if _, err := v.Verify(ctx, good); err != nil {
		t.Fatalf("good token: %v", err)
	}
	foreign, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, kid := p.PublicKey()
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), alice.Subject, "mallory", 1))) + "." + parts[2]
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`)) + "." + parts[1] + "."
	cases := []struct {
		name, token, want string
		is                error
	}{
		{"expired", p.Mint(t, map[string]any{"sub": "x", "exp": time.Now().Add(-time.Hour).Unix()}), "expired", auth.ErrExpired},
		{"wrong issuer", other.Mint(t, map[string]any{"sub": "x", "iss": other.URL}), "", auth.ErrInvalid},
		{"wrong issuer, right key", p.Mint(t, map[string]any{"sub": "x", "iss": "https://evil.example.com"}), "different provider", auth.ErrInvalid},
		{"wrong audience", p.Mint(t, map[string]any{"sub": "x", "aud": "someone-else"}), "audience", auth.ErrInvalid},
		{"unsigned alg none", none, "", auth.ErrInvalid},
		{"tampered payload", tampered, "signature", auth.ErrInvalid},
		{"foreign key, known key id", testoidc.SignWith(t, foreign, kid, map[string]any{"iss": p.URL, "aud": testoidc.ClientID, "sub": "x", "exp": time.Now().Add(time.Hour).Unix()}), "signature", auth.ErrInvalid},
		{"no subject", p.Mint(t, map[string]any{"email": "x@example.com"}), "subject", auth.ErrInvalid},
		{"garbage", "not.a.jwt", "", auth.ErrInvalid},
		{"empty", "", "empty", auth.ErrInvalid},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := v.Verify(ctx, c.token)
			if !errors.Is(err, c.is) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %v containing %q", err, c.is, c.want)
			}
		})
	}
	// Within the clock-skew allowance an expiry in the past still passes.
	if _, err := v.Verify(ctx, p.Mint(t, map[string]any{"sub": "x", "exp": time.Now().Add(-20 * time.Second).Unix()})); err != nil {
		t.Fatalf("token inside the skew allowance: %v", err)
	}
}

func TestIdPDownThenUp(t *testing.T) {
	v, err := auth.NewVerifier(auth.JWTConfig{Issuer: "http://127.0.0.1:1/idp", Audiences: []string{"x"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), "a.b.c"); !errors.Is(err, auth.ErrIdPUnusable) {
		t.Fatalf("unreachable IdP: %v", err)
	}
}

func TestPAT(t *testing.T) {
	plain, hash, err := auth.NewPAT()
	if err != nil {
		t.Fatal(err)
	}
	if len(plain) != 40 || !strings.HasPrefix(plain, "nbp_") {
		t.Fatalf("token %q", plain)
	}
	got, err := auth.ParsePAT(plain)
	if err != nil || got != hash {
		t.Fatalf("parse: %q %v", got, err)
	}
	flip := []byte(plain)
	flip[10] ^= 1
	for _, bad := range []string{"", "nbp_", plain[:39], plain + "x", "xbp_" + plain[4:], string(flip), strings.Replace(plain, plain[5:6], "!", 1)} {
		if _, err := auth.ParsePAT(bad); !errors.Is(err, auth.ErrMalformedPAT) {
			t.Errorf("ParsePAT(%q) = %v", bad, err)
		}
	}
}

func FuzzParsePAT(f *testing.F) {
	plain, _, _ := auth.NewPAT()
	f.Add(plain)
	f.Add("nbp_")
	f.Fuzz(func(t *testing.T, s string) {
		h, err := auth.ParsePAT(s)
		if err == nil && (len(s) != 40 || h == "") {
			t.Fatalf("accepted %q", s)
		}
	})
}
