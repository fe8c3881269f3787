package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/users"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestExternalIdPAccounts runs management against a separate OpenID
// Connect provider in multi-account mode: users of two e-mail domains get
// two accounts, and nothing of one is visible to the other through any
// endpoint.
func TestExternalIdPAccounts(t *testing.T) { engines.Each(t, testExternalIdPAccounts) }

func testExternalIdPAccounts(t *testing.T, eng storetest.Engine) {
	alice := testoidc.User{Subject: "a|1", Email: "alice@a.example", Name: "Alice", Password: "alice-password", Groups: []string{"engineering"}}
	idp := testoidc.Start(t, "", alice)
	e := startOn(t, eng, server.Options{Identity: server.Identity{Issuer: idp.URL, ClientID: testoidc.ClientID, Mode: users.DomainAccounts,
		AccountDomains: []string{"a.example"}}})
	ctx := context.Background()
	// Alice's verified address places her first: a.example is listed, so
	// she creates its account.
	e.api("Bearer "+idp.Mint(t, map[string]any{"sub": "a|1", "email": "alice@a.example", "email_verified": true})).call("GET", "/api/users/current", nil, 200)

	// Alice's agent logs in through the device flow the server describes
	// (discovered from the external provider).
	pa := testpeer.New(e.conn, "alice-laptop")
	if _, err := pa.PKCEFlow(ctx); err != nil {
		t.Fatalf("PKCE flow: %v", err)
	}
	jwtA := deviceLogin(t, pa, alice.Email, alice.Password)
	if _, err := pa.LoginJWT(ctx, jwtA); err != nil {
		t.Fatalf("alice's SSO login: %v", err)
	}
	a := e.api("Bearer " + jwtA)
	meA := obj(a.call("GET", "/api/users/current", nil, 200))
	if meA["role"] != "owner" {
		t.Fatalf("first user of a.example is %v", meA["role"])
	}
	// A colleague joins alice's account as a user; bob gets his own.
	carol := e.api("Bearer " + idp.Mint(t, map[string]any{"sub": "a|2", "email": "carol@a.example", "email_verified": true, "name": "Carol"}))
	// An address the IdP does not vouch for never joins a shared account.
	stranger := e.api("Bearer " + idp.Mint(t, map[string]any{"sub": "x|1", "email": "mallory@a.example", "email_verified": false}))
	if r := obj(stranger.call("GET", "/api/users/current", nil, 200))["role"]; r != "owner" {
		t.Fatalf("unverified a.example address is %v, want the owner of its own account", r)
	}
	bob := e.api("Bearer " + idp.Mint(t, map[string]any{"sub": "b|1", "email": "bob@b.example", "name": "Bob"}))
	if r := obj(carol.call("GET", "/api/users/current", nil, 200))["role"]; r != "user" {
		t.Fatalf("second user of a.example is %v", r)
	}
	meB := obj(bob.call("GET", "/api/users/current", nil, 200))
	if meB["role"] != "owner" {
		t.Fatalf("first user of b.example is %v", meB["role"])
	}
	if n := len(list(a.call("GET", "/api/users", nil, 200))); n != 2 {
		t.Fatalf("alice's account has %d users, want 2", n)
	}
	accA := obj(list(a.call("GET", "/api/accounts", nil, 200))[0])["id"].(string)
	accB := obj(list(bob.call("GET", "/api/accounts", nil, 200))[0])["id"].(string)
	if accA == accB {
		t.Fatal("two domains share an account")
	}
	// Bob's account has a token and a peer.
	bobID := meB["id"].(string)
	tok := obj(obj(bob.call("POST", "/api/users/"+bobID+"/tokens", map[string]any{"name": "t", "expires_in": 1}, 200))["personal_access_token"])["id"].(string)
	pb := testpeer.New(e.conn, "bob-server")
	if _, err := pb.LoginJWT(ctx, idp.Mint(t, map[string]any{"sub": "b|1", "email": "bob@b.example"})); err != nil {
		t.Fatal(err)
	}
	peerB := obj(list(bob.call("GET", "/api/peers", nil, 200))[0])["id"].(string)

	// Alice reaches none of it: every read and write is "not found".
	for _, c := range []struct{ method, path string }{
		{"GET", "/api/users/" + bobID},
		{"PUT", "/api/users/" + bobID},
		{"DELETE", "/api/users/" + bobID},
		{"GET", "/api/users/" + bobID + "/tokens"},
		{"POST", "/api/users/" + bobID + "/tokens"},
		{"GET", "/api/users/" + bobID + "/tokens/" + tok},
		{"DELETE", "/api/users/" + bobID + "/tokens/" + tok},
		{"GET", "/api/peers/" + peerB},
		{"PUT", "/api/peers/" + peerB},
		{"DELETE", "/api/peers/" + peerB},
		{"PUT", "/api/accounts/" + accB},
	} {
		body := map[string]any{"role": "user", "auto_groups": []string{}, "name": "x", "expires_in": 1, "settings": map[string]any{}}
		a.call(c.method, c.path, body, 404)
	}
	for _, p := range list(a.call("GET", "/api/peers", nil, 200)) {
		if obj(p)["id"] == peerB {
			t.Fatal("alice lists bob's peer")
		}
	}
	// Bob's peer does not appear in alice's peer's map either.
	st, err := pa.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if nm := st.LatestMap(); len(nm.GetRemotePeers()) != 0 {
		t.Fatalf("alice's peer sees %d peers of another account", len(nm.GetRemotePeers()))
	}
	// Bob still has his token and peer.
	if len(list(bob.call("GET", "/api/users/"+bobID+"/tokens", nil, 200))) != 1 || len(list(bob.call("GET", "/api/peers", nil, 200))) != 1 {
		t.Fatal("bob's data changed")
	}
}

// TestJWTGroupSync: with group sync on, the token's groups become groups
// of the account with the user's peers in them, and they follow the IdP.
func TestJWTGroupSync(t *testing.T) { engines.Each(t, testJWTGroupSync) }

func testJWTGroupSync(t *testing.T, eng storetest.Engine) {
	idp := testoidc.Start(t, "")
	e := startOn(t, eng, server.Options{Identity: server.Identity{Issuer: idp.URL, ClientID: testoidc.ClientID}})
	ctx := context.Background()
	mint := func(groups ...string) string {
		return idp.Mint(t, map[string]any{"sub": "u|1", "email": "u@example.com", "groups": groups})
	}
	owner := e.api("Bearer " + mint("devs"))
	acc := obj(list(owner.call("GET", "/api/accounts", nil, 200))[0])
	// Reads go through a token, which carries no groups (each JWT request
	// syncs the caller's groups).
	me := obj(owner.call("GET", "/api/users/current", nil, 200))["id"].(string)
	owner = e.api("Token " + obj(owner.call("POST", "/api/users/"+me+"/tokens", map[string]any{"name": "read", "expires_in": 1}, 200))["plain_token"].(string))
	owner.call("PUT", "/api/accounts/"+acc["id"].(string), map[string]any{"settings": map[string]any{
		"peer_login_expiration_enabled": true, "peer_login_expiration": 86400, "jwt_groups_enabled": true, "jwt_groups_claim_name": "groups",
		"groups_propagation_enabled": true}}, 200)
	p := testpeer.New(e.conn, "box")
	if _, err := p.LoginJWT(ctx, mint("devs", "ops")); err != nil {
		t.Fatal(err)
	}
	groupsOf := func() string {
		ps := list(owner.call("GET", "/api/peers", nil, 200))
		var names []string
		for _, g := range list(obj(ps[0])["groups"]) {
			names = append(names, obj(g)["name"].(string))
		}
		return strings.Join(names, ",")
	}
	// The peer registered with the token's groups as the user's groups.
	if got := groupsOf(); got != "All,devs,ops" {
		t.Fatalf("groups after login: %q", got)
	}
	// The IdP drops "ops": the next login moves the peer out of it.
	e.api("Bearer "+mint("devs")).call("GET", "/api/users/current", nil, 200)
	if got := groupsOf(); got != "All,devs" {
		t.Fatalf("groups after the IdP dropped ops: %q", got)
	}
}

// TestLoginExpiration: a peer added through SSO must log in again when
// the account's login expiration passes; a setup-key peer never does.
func TestLoginExpiration(t *testing.T) {
	idp := testoidc.Start(t, "")
	e := startWith(t, t.TempDir(), server.Options{ExpiryCheck: 200 * time.Millisecond,
		Identity: server.Identity{Issuer: idp.URL, ClientID: testoidc.ClientID}})
	ctx := context.Background()
	jwt := func() string { return idp.Mint(t, map[string]any{"sub": "u|1", "email": "u@example.com"}) }
	owner := e.api("Bearer " + jwt())
	acc := obj(list(owner.call("GET", "/api/accounts", nil, 200))[0])["id"].(string)
	owner.call("PUT", "/api/accounts/"+acc, map[string]any{"settings": map[string]any{"peer_login_expiration_enabled": true, "peer_login_expiration": -1}}, 422)
	owner.call("PUT", "/api/accounts/"+acc, map[string]any{"settings": map[string]any{"peer_login_expiration_enabled": true, "peer_login_expiration": 3}}, 200)

	sso := testpeer.New(e.conn, "sso")
	if _, err := sso.LoginJWT(ctx, jwt()); err != nil {
		t.Fatal(err)
	}
	_, secret := e.setupKey(setupkeyReusable())
	keyed := testpeer.New(e.conn, "keyed")
	if _, err := keyed.Login(ctx, secret); err != nil {
		t.Fatal(err)
	}
	other, err := keyed.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	mine, err := sso.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	if err := other.WaitFor(3*time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(other.LatestMap(), sso.Public()) }); err != nil {
		t.Fatal("SSO peer not in the map")
	}
	// After 3 s: the SSO peer's stream ends with the text the official
	// client looks for, it leaves the other map, and a keyless login is
	// refused until the user logs in again.
	if err := mine.WaitFor(8*time.Second, func([]*mgmtpb.SyncResponse) bool { return mine.Err() != nil }); err != nil ||
		status.Code(mine.Err()) != codes.PermissionDenied || !strings.Contains(mine.Err().Error(), "peer login has expired") {
		t.Fatalf("SSO stream after expiry: %v", mine.Err())
	}
	if err := other.WaitFor(3*time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(other.LatestMap()) }); err != nil {
		t.Fatal("expired peer still in the other map")
	}
	if _, err := sso.Login(ctx, ""); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "peer login has expired") {
		t.Fatalf("keyless login of an expired peer: %v", err)
	}
	if _, err := sso.Sync(ctx); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("sync of an expired peer: %v", err)
	}
	if _, err := keyed.Login(ctx, ""); err != nil {
		t.Fatalf("setup-key peer after the expiration: %v", err)
	}
	if _, err := sso.LoginJWT(ctx, jwt()); err != nil {
		t.Fatalf("renewed login: %v", err)
	}
	if err := other.WaitFor(3*time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(other.LatestMap(), sso.Public()) }); err != nil {
		t.Fatal("renewed peer not back in the map")
	}
}

func setupkeyReusable() setupkey.Options { return setupkey.Options{Reusable: true} }
