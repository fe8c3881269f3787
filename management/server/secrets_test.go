package server_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestIdPSecretsSealedAtRest: a client secret given through the API is
// stored sealed with the key file in the data directory; a secret left in
// plain text (by an older version) is sealed at the next start, once (a
// further start changes nothing); an instance with another key refuses to
// start, naming the way out; --store-encryption-key-lost adopts the new
// key and drops the secrets sealed with the old one.
func TestIdPSecretsSealedAtRest(t *testing.T) { engines.Each(t, testIdPSecretsSealedAtRest) }

func testIdPSecretsSealedAtRest(t *testing.T, eng storetest.Engine) {
	ctx := context.Background()
	cfg := eng.Config(t)
	start := func(c store.Config) *env {
		return startWith(t, c.DataDir, server.Options{Store: c, Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	}
	stored := func(e *env, id string) string {
		t.Helper()
		var v string
		if err := e.srv.Store.Read(ctx, func(tx *store.Tx) error {
			p, err := tx.IdentityProviderByID(ctx, id)
			v = p.ClientSecret
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return v
	}
	key, err := secretbox.LoadKeyFile(cfg.DataDir)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := secretbox.New(key)

	e := start(cfg)
	setup := obj(e.api("").call("POST", "/api/setup", map[string]any{"email": "o@example.com", "password": "Owner-passw0rd!", "name": "O", "create_pat": true}, 200))
	o := e.api("Token " + setup["personal_access_token"].(string))
	p := obj(o.call("POST", "/api/identity-providers", map[string]any{"type": "oidc", "name": "Corp", "issuer": "https://sso.example.com",
		"client_id": "wm", "client_secret": "api-s3cret"}, 200))
	id := p["id"].(string)
	if _, has := p["client_secret"]; has {
		t.Fatalf("client secret returned: %v", p)
	}
	if v := stored(e, id); !secretbox.Sealed(v) || strings.Contains(v, "api-s3cret") {
		t.Fatalf("stored %q, want it sealed", v)
	}
	// An older version's plain-text secret.
	if err := e.srv.Store.Tx(ctx, func(tx *store.Tx) error { return tx.SetIdentityProviderSecret(ctx, id, "legacy-s3cret") }); err != nil {
		t.Fatal(err)
	}
	e.stop()

	e = start(cfg)
	sealed := stored(e, id)
	if plain, err := box.Open(sealed, id); err != nil || plain != "legacy-s3cret" {
		t.Fatalf("after restart: stored %q opens to %q %v", sealed, plain, err)
	}
	e.stop()
	e = start(cfg)
	if again := stored(e, id); again != sealed {
		t.Fatalf("a second start changed the sealed secret: %q -> %q", sealed, again)
	}
	e.stop()

	other := cfg
	other.SecretKey = base64.StdEncoding.EncodeToString([]byte("another key, 32 bytes long......"))
	_, err = server.Open(ctx, server.Options{Store: other, Identity: server.Identity{BuiltInIssuer: "http://127.0.0.1:1/oauth2"}})
	if !errors.Is(err, secretbox.ErrWrongKey) || !strings.Contains(err.Error(), "--store-encryption-key-lost") {
		t.Fatalf("start with another key: %v, want ErrWrongKey naming the way out", err)
	}
	other.ForgetLostSecretKey = true
	e = start(other)
	if v := stored(e, id); v != "" {
		t.Fatalf("secret sealed with the lost key kept: %q", v)
	}
	e.stop()
	other.ForgetLostSecretKey = false
	e = start(other) // the new key is the store's now
	e.stop()
}
