package httpapi_test

import (
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
)

// conformIdPs drives the identity-provider operations: create, list,
// get, update (an empty secret keeps the stored one), delete; the secret
// is never returned; bad fields answer 422 naming the field and store
// nothing.
func conformIdPs(t *testing.T, d *docRig) {
	t.Helper()
	body := map[string]any{"type": "oidc", "name": "Corp SSO", "issuer": "https://sso.example.com/", "client_id": "wiremesh", "client_secret": "s3cret"}
	p := d.call("POST", "/api/identity-providers", "/api/identity-providers", body, 200)
	id := str(p, "id")
	if id == "" || str(p, "issuer") != "https://sso.example.com" || str(p, "name") != "Corp SSO" {
		t.Fatalf("created %v", p)
	}
	if _, has := obj(p)["client_secret"]; has {
		t.Fatalf("client secret returned: %v", p)
	}
	for field, bad := range map[string]map[string]any{
		"type":      {"type": "ldap", "name": "x", "issuer": "https://a.example", "client_id": "c"},
		"name":      {"type": "oidc", "name": " ", "issuer": "https://a.example", "client_id": "c"},
		"issuer":    {"type": "oidc", "name": "x", "issuer": "http://sso.example.com", "client_id": "c"},
		"client_id": {"type": "oidc", "name": "x", "issuer": "https://a.example"},
	} {
		e := obj(d.call("POST", "/api/identity-providers", "/api/identity-providers", bad, 422))
		if msg, _ := e["message"].(string); !strings.Contains(msg, field) {
			t.Errorf("bad %s: message %q does not name it", field, msg)
		}
	}
	if l := list(d.call("GET", "/api/identity-providers", "/api/identity-providers", nil, 200)); len(l) != 1 || str(l[0], "id") != id {
		t.Fatalf("list after refused creations: %v", l)
	}
	d.call("GET", "/api/identity-providers/{idpId}", "/api/identity-providers/"+id, nil, 200)
	d.call("GET", "/api/identity-providers/{idpId}", "/api/identity-providers/nosuch", nil, 404)
	up := d.call("PUT", "/api/identity-providers/{idpId}", "/api/identity-providers/"+id,
		map[string]any{"type": "okta", "name": "Okta", "issuer": "https://corp.okta.com", "client_id": "wm2"}, 200)
	if str(up, "type") != "okta" || str(up, "client_id") != "wm2" {
		t.Fatalf("updated %v", up)
	}
	var secret string
	if err := d.st.Read(t.Context(), func(tx *store.Tx) error {
		p, err := tx.IdentityProviderByID(t.Context(), id)
		secret = p.ClientSecret
		return err
	}); err != nil || !secretbox.Sealed(secret) || strings.Contains(secret, "s3cret") {
		t.Fatalf("stored secret after an update without one: %q %v (want it sealed)", secret, err)
	}
	if plain, err := d.secrets.Open(secret, id); err != nil || plain != "s3cret" {
		t.Fatalf("stored secret opens to %q %v", plain, err)
	}
	for _, p := range list(d.call("GET", "/api/identity-providers", "/api/identity-providers", nil, 200)) {
		if _, has := obj(p)["client_secret"]; has {
			t.Fatalf("client secret listed: %v", p)
		}
	}
	d.call("DELETE", "/api/identity-providers/{idpId}", "/api/identity-providers/"+id, nil, 200)
	d.call("DELETE", "/api/identity-providers/{idpId}", "/api/identity-providers/"+id, nil, 404)
}
