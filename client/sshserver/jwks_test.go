package sshserver_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/wiremesh/wiremesh/client/sshserver"
)

// jwksServer serves the public halves of keys as a JWKS document and
// counts the fetches.
type jwksServer struct {
	*httptest.Server
	fetches atomic.Int32
	mu      sync.Mutex
	keys    map[string]*rsa.PrivateKey
	body    []byte // served instead of the keys when set
}

func newJWKSServer(t *testing.T) *jwksServer {
	t.Helper()
	s := &jwksServer{keys: map[string]*rsa.PrivateKey{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		s.fetches.Add(1)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.body != nil {
			w.Write(s.body)
			return
		}
		var set jose.JSONWebKeySet
		for kid, k := range s.keys {
			set.Keys = append(set.Keys, jose.JSONWebKey{Key: k.Public(), KeyID: kid, Algorithm: "RS256", Use: "sig"})
		}
		json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *jwksServer) addKey(t *testing.T, kid string) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	s.keys[kid] = k
	s.mu.Unlock()
	return k
}

// signKID signs a valid token (as idp.token) with key, naming kid.
func signKID(t *testing.T, key *rsa.PrivateKey, kid string, now time.Time) string {
	t.Helper()
	opts := (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid)
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, opts)
	if err != nil {
		t.Fatal(err)
	}
	c := map[string]any{"iss": testIssuer, "aud": testAud, "sub": "user-1", "iat": now.Add(-time.Minute).Unix(), "exp": now.Add(time.Hour).Unix()}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestJWKSFetchBounded: forged tokens (a known key ID with a wrong
// signature, or an unknown key ID) do not make the agent download the
// provider's keys again and again: known key IDs never refetch, unknown
// ones at most once per KeyRefetchInterval; a rotated-in key is picked up
// after that interval.
func TestJWKSFetchBounded(t *testing.T) {
	srv := newJWKSServer(t)
	good := srv.addKey(t, "k1")
	forger, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	now := testNow
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	v, err := sshserver.NewJWTVerifier(sshserver.JWTConfig{Issuer: testIssuer, Audiences: []string{testAud}, KeysLocation: srv.URL},
		nil, srv.Client(), clock)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if id, err := v.Verify(ctx, signKID(t, good, "k1", clock()), ""); err != nil || id != "user-1" {
		t.Fatalf("valid token: %q, %v", id, err)
	}
	if got := srv.fetches.Load(); got != 1 {
		t.Fatalf("%d fetches for the first token, want 1", got)
	}
	for i := range 200 {
		kid := "k1"
		if i%2 == 1 {
			kid = "forged-kid"
		}
		if _, err := v.Verify(ctx, signKID(t, forger, kid, clock()), ""); !errors.Is(err, sshserver.ErrTokenRefused) {
			t.Fatalf("forged token %d: %v, want refused", i, err)
		}
	}
	if got := srv.fetches.Load(); got != 1 {
		t.Fatalf("200 forged tokens within a minute made %d fetches in all, want 1", got)
	}
	// The provider rotates in k2: a token naming it is refused until a
	// minute has passed since the last fetch, then accepted after one fetch.
	k2 := srv.addKey(t, "k2")
	if _, err := v.Verify(ctx, signKID(t, k2, "k2", clock()), ""); !errors.Is(err, sshserver.ErrTokenRefused) || !strings.Contains(err.Error(), "next fetch allowed") {
		t.Fatalf("new key within the interval: %v, want refused until the next fetch", err)
	}
	advance(sshserver.KeyRefetchInterval)
	if _, err := v.Verify(ctx, signKID(t, k2, "k2", clock()), ""); err != nil {
		t.Fatalf("new key after the interval: %v", err)
	}
	if got := srv.fetches.Load(); got != 2 {
		t.Fatalf("%d fetches after the rotation, want 2", got)
	}
	// Forged tokens with unknown key IDs after another interval: one more
	// fetch at most, however many.
	advance(sshserver.KeyRefetchInterval)
	for range 50 {
		v.Verify(ctx, signKID(t, forger, "nope", clock()), "")
	}
	if got := srv.fetches.Load(); got != 3 {
		t.Fatalf("%d fetches, want 3", got)
	}
}

// TestJWKSResponseCapped: a key document past 1 MiB is refused, not read
// into memory whole.
func TestJWKSResponseCapped(t *testing.T) {
	srv := newJWKSServer(t)
	key := srv.addKey(t, "k1")
	srv.body = []byte(`{"keys":[` + strings.Repeat(" ", 2<<20) + `]}`)
	v, err := sshserver.NewJWTVerifier(sshserver.JWTConfig{Issuer: testIssuer, Audiences: []string{testAud}, KeysLocation: srv.URL},
		nil, srv.Client(), func() time.Time { return testNow })
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(context.Background(), signKID(t, key, "k1", testNow), ""); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("oversized key document: %v, want refused as too large", err)
	}
}
