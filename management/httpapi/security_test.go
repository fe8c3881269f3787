package httpapi_test

import (
	"bytes"
	"context"
	"crypto"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/dnsadmin"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/routing"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/updates"
	"github.com/wiremesh/wiremesh/management/users"
)

// rig is the REST API with the built-in identity provider on a real
// store of one engine, served over HTTP, with an owner set up.
type rig struct {
	t        *testing.T
	st       *store.Store
	url      string
	provider *oidcop.Provider
	owner    client
	ownerID  string
}

const ownerPassword = "Owner-passw0rd!"

func newRig(t *testing.T, eng storetest.Engine) *rig {
	t.Helper()
	ctx := context.Background()
	st := eng.Open(t)
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	p, err := idp.New(ctx, st, idp.Options{Issuer: srv.URL + "/oauth2"})
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := p.PublicKey()
	v, err := auth.NewVerifier(auth.JWTConfig{Issuer: p.Issuer(), Audiences: []string{idp.AgentClientID, idp.DashboardClientID},
		KeySet: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{pub}}})
	if err != nil {
		t.Fatal(err)
	}
	hub := updates.NewHub()
	us := users.New(users.Options{Store: st, Notify: hub, LocalIdP: true})
	api := httpapi.New(httpapi.Options{Store: st, Users: us, Peers: peers.New(st, hub, nil, nil), Access: access.New(st, hub, nil), JWT: v,
		Routing: routing.New(st, hub, routing.Options{}), DNS: dnsadmin.New(st, hub, dnsadmin.Options{})})
	mux.Handle("/api/", api)
	mux.Handle("/oauth2/", p)
	r := &rig{t: t, st: st, url: srv.URL, provider: p}
	setup := obj(r.client("").call("POST", "/api/setup", map[string]any{"email": "owner@example.com", "password": ownerPassword, "name": "Owner", "create_pat": true}, 200))
	r.owner, r.ownerID = r.client("Token "+setup["personal_access_token"].(string)), setup["user_id"].(string)
	return r
}

// client calls the API with one Authorization header.
type client struct {
	t    *testing.T
	base string
	auth string
}

func (r *rig) client(auth string) client { return client{t: r.t, base: r.url, auth: auth} }

func (c client) call(method, path string, body any, want int) any {
	c.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, c.base+path, rd)
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		c.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		c.t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
	}
	return v
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }

// invite makes a local user through an invitation and returns its ID.
func (r *rig) invite(email, password string) string {
	r.t.Helper()
	inv := obj(r.owner.call("POST", "/api/users/invites", map[string]any{"email": email, "name": email, "role": "user", "auto_groups": []string{}}, 200))
	r.client("").call("POST", "/api/users/invites/"+inv["invite_token"].(string)+"/accept", map[string]string{"password": password}, 200)
	for _, u := range list(r.owner.call("GET", "/api/users", nil, 200)) {
		if obj(u)["email"] == email {
			return obj(u)["id"].(string)
		}
	}
	r.t.Fatalf("no user %s after the invitation was accepted", email)
	return ""
}

// login runs the agent's device flow at the built-in provider, approving
// it through the provider's own pages, and returns the access token.
func (r *rig) login(email, password string) string {
	r.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ep := r.provider.Endpoints()
	cfg := &oauth2.Config{ClientID: idp.AgentClientID, Scopes: []string{"openid", "profile", "email"},
		Endpoint: oauth2.Endpoint{DeviceAuthURL: ep.DeviceAuthorization, TokenURL: ep.Token, AuthStyle: oauth2.AuthStyleInParams}}
	da, err := cfg.DeviceAuth(ctx, oauth2.SetAuthURLParam("audience", idp.AgentClientID))
	if err != nil {
		r.t.Fatalf("device authorization: %v", err)
	}
	if err := testoidc.ApproveDevice(nil, da.VerificationURI, da.UserCode, email, password); err != nil {
		r.t.Fatal(err)
	}
	da.Interval = 1
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		r.t.Fatalf("device token: %v", err)
	}
	return tok.AccessToken
}

func (r *rig) userCount() int {
	r.t.Helper()
	return len(list(r.owner.call("GET", "/api/users", nil, 200)))
}

// TestDeletedUserLosesAccessAtOnce: a deleted user's still-valid access
// token neither works nor creates the user again, and its personal access
// token is gone.
func TestDeletedUserLosesAccessAtOnce(t *testing.T) {
	engines.Each(t, testDeletedUserLosesAccessAtOnce)
}

func testDeletedUserLosesAccessAtOnce(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	id := r.invite("dev@example.com", "Dev-passw0rd!")
	dev := r.client("Bearer " + r.login("dev@example.com", "Dev-passw0rd!"))
	dev.call("GET", "/api/users/current", nil, 200)
	// The user role manages no tokens (as the reference's): dev makes its
	// own as an admin.
	r.owner.call("PUT", "/api/users/"+id, map[string]any{"role": "admin", "auto_groups": []string{}, "is_blocked": false}, 200)
	pat := obj(dev.call("POST", "/api/users/"+id+"/tokens", map[string]any{"name": "mine", "expires_in": 365}, 200))["plain_token"].(string)

	r.owner.call("DELETE", "/api/users/"+id, nil, 200)
	dev.call("GET", "/api/users/current", nil, 401)
	dev.call("POST", "/api/users/"+id+"/tokens", map[string]any{"name": "again", "expires_in": 365}, 401)
	r.client("Token "+pat).call("GET", "/api/users/current", nil, 401)
	if n := r.userCount(); n != 1 {
		t.Fatalf("%d users after the deletion, want the owner only", n)
	}
}

// TestBlockedUserOldTokenStaysVoid: a token from before a block does not
// come back to life when the user is unblocked; a new login works.
func TestBlockedUserOldTokenStaysVoid(t *testing.T) {
	engines.Each(t, testBlockedUserOldTokenStaysVoid)
}

func testBlockedUserOldTokenStaysVoid(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	id := r.invite("dev@example.com", "Dev-passw0rd!")
	dev := r.client("Bearer " + r.login("dev@example.com", "Dev-passw0rd!"))
	dev.call("GET", "/api/users/current", nil, 200)
	for _, blocked := range []bool{true, false} {
		r.owner.call("PUT", "/api/users/"+id, map[string]any{"role": "user", "auto_groups": []string{}, "is_blocked": blocked}, 200)
	}
	dev.call("GET", "/api/users/current", nil, 401)
	time.Sleep(1100 * time.Millisecond) // token times are whole seconds
	r.client("Bearer "+r.login("dev@example.com", "Dev-passw0rd!")).call("GET", "/api/users/current", nil, 200)
}

// TestRevokedAccessTokenRefused: revoking an access token at the built-in
// provider's revocation endpoint ends it at management.
func TestRevokedAccessTokenRefused(t *testing.T) { engines.Each(t, testRevokedAccessTokenRefused) }

func testRevokedAccessTokenRefused(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	r.invite("dev@example.com", "Dev-passw0rd!")
	jwt := r.login("dev@example.com", "Dev-passw0rd!")
	dev := r.client("Bearer " + jwt)
	dev.call("GET", "/api/users/current", nil, 200)
	resp, err := http.PostForm(r.provider.Issuer()+"/revoke", url.Values{"token": {jwt}, "token_type_hint": {"access_token"}, "client_id": {idp.AgentClientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("revocation: %s", resp.Status)
	}
	dev.call("GET", "/api/users/current", nil, 401)
	// A token that is not the provider's is accepted and ignored (RFC 7009)
	// and records nothing.
	resp, err = http.PostForm(r.provider.Issuer()+"/revoke", url.Values{"token": {"garbage"}, "client_id": {idp.AgentClientID}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("revocation of garbage: %s", resp.Status)
	}
	err = r.st.Read(context.Background(), func(tx *store.Tx) error {
		if revoked, err := tx.AccessTokenRevoked(context.Background(), "garbage"); err != nil || revoked {
			return fmt.Errorf("garbage recorded as revoked: %v %v", revoked, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// addPeer stores a peer of the owner's account added by user (or by a
// setup key when user is empty).
func (r *rig) addPeer(n int, user string) account.Peer {
	r.t.Helper()
	ctx := context.Background()
	var p account.Peer
	err := r.st.Tx(ctx, func(tx *store.Tx) error {
		accs, err := tx.Accounts(ctx)
		if err != nil {
			return err
		}
		acc := accs[0]
		k, err := key.NewPrivate()
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		ip := acc.Network.Addr()
		for range n + 1 {
			ip = ip.Next()
		}
		p = account.Peer{ID: account.PeerID(fmt.Sprintf("peer-%d", n)), AccountID: acc.ID, Key: k.Public(), IP: ip,
			Name: fmt.Sprintf("host-%d", n), DNSLabel: fmt.Sprintf("host-%d", n), Meta: account.Meta{Hostname: "h", OS: "linux"},
			UserID: account.UserID(user), LoginExpirationEnabled: user != "", CreatedAt: now, LastLogin: now, LastSeen: now}
		return tx.In(acc.ID).InsertPeer(ctx, p)
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return p
}

// TestRegularUserPeerLimits: a regular user (as the reference's, granted
// no module) reads its own peers, whose group summaries show only its own
// peers, but not the groups, and changes none of its peers.
func TestRegularUserPeerLimits(t *testing.T) { engines.Each(t, testRegularUserPeerLimits) }

func testRegularUserPeerLimits(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	id := r.invite("dev@example.com", "Dev-passw0rd!")
	dev := r.client("Bearer " + r.login("dev@example.com", "Dev-passw0rd!"))
	mine := r.addPeer(1, id)
	other := r.addPeer(2, r.ownerID)
	r.owner.call("POST", "/api/groups", map[string]any{"name": "mixed", "peers": []string{string(mine.ID), string(other.ID)}}, 200)

	dev.call("GET", "/api/groups", nil, 403)
	for _, g := range list(r.owner.call("GET", "/api/groups", nil, 200)) {
		if n := len(list(obj(g)["peers"])); n != 2 {
			t.Errorf("owner sees %d peers in %v", n, obj(g)["name"])
		}
	}
	for _, g := range obj(dev.call("GET", "/api/peers/"+string(mine.ID), nil, 200))["groups"].([]any) {
		if obj(g)["peers_count"] != float64(1) {
			t.Errorf("regular user's peer is in %v", g)
		}
	}
	dev.call("PUT", "/api/peers/"+string(mine.ID), map[string]any{"name": "renamed", "ssh_enabled": false, "login_expiration_enabled": false}, 403)
	dev.call("PUT", "/api/peers/"+string(mine.ID), map[string]any{"name": "renamed", "ssh_enabled": false, "login_expiration_enabled": true}, 403)
	dev.call("DELETE", "/api/peers/"+string(mine.ID), nil, 403)
	dev.call("POST", "/api/users/"+id+"/tokens", map[string]any{"name": "t", "expires_in": 30}, 403)
	if p := obj(r.owner.call("GET", "/api/peers/"+string(mine.ID), nil, 200)); p["login_expiration_enabled"] != true || p["name"] == "renamed" {
		t.Fatalf("peer after the refused change: %v", p)
	}
	r.owner.call("PUT", "/api/peers/"+string(mine.ID), map[string]any{"name": "renamed", "ssh_enabled": false, "login_expiration_enabled": false}, 200)
}

// TestAccessiblePeersOwnPeerOnly: a regular user lists the accessible
// peers of its own peer; another's peer is as unknown as a missing one.
func TestAccessiblePeersOwnPeerOnly(t *testing.T) { engines.Each(t, testAccessiblePeersOwnPeerOnly) }

func testAccessiblePeersOwnPeerOnly(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	id := r.invite("dev@example.com", "Dev-passw0rd!")
	dev := r.client("Bearer " + r.login("dev@example.com", "Dev-passw0rd!"))
	mine := r.addPeer(1, id)
	other := r.addPeer(2, r.ownerID)
	if l := list(dev.call("GET", "/api/peers/"+string(mine.ID)+"/accessible-peers", nil, 200)); len(l) != 1 || obj(l[0])["id"] != string(other.ID) {
		t.Errorf("accessible peers of the user's peer: %v", l)
	}
	dev.call("GET", "/api/peers/"+string(other.ID)+"/accessible-peers", nil, 404)
	r.owner.call("GET", "/api/peers/no-such-peer/accessible-peers", nil, 404)
	if l := list(r.owner.call("GET", "/api/peers/"+string(other.ID)+"/accessible-peers", nil, 200)); len(l) != 1 || obj(l[0])["id"] != string(mine.ID) {
		t.Errorf("accessible peers of the owner's peer: %v", l)
	}
}

// TestOverflowingDurationsRefused: durations are bounded before they are
// multiplied, so no value wraps around into "never expires".
func TestOverflowingDurationsRefused(t *testing.T) { engines.Each(t, testOverflowingDurationsRefused) }

func testOverflowingDurationsRefused(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	acc := obj(list(r.owner.call("GET", "/api/accounts", nil, 200))[0])["id"].(string)
	const huge = 9223372037
	r.owner.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": huge, "auto_groups": []string{}}, 422)
	r.owner.call("POST", "/api/users/invites", map[string]any{"email": "a@example.com", "name": "a", "role": "user", "auto_groups": []string{}, "expires_in": huge}, 422)
	r.owner.call("PUT", "/api/accounts/"+acc, map[string]any{"settings": map[string]any{"peer_login_expiration_enabled": true, "peer_login_expiration": huge}}, 422)
	r.owner.call("POST", "/api/users/"+r.ownerID+"/tokens", map[string]any{"name": "t", "expires_in": huge}, 422)
	if n := len(list(r.owner.call("GET", "/api/setup-keys", nil, 200))); n != 0 {
		t.Fatalf("%d setup keys after refused requests", n)
	}
	if n := len(list(r.owner.call("GET", "/api/users/invites", nil, 200))); n != 0 {
		t.Fatalf("%d invites after refused requests", n)
	}
	if s := obj(obj(list(r.owner.call("GET", "/api/accounts", nil, 200))[0])["settings"]); s["peer_login_expiration"] != float64(86400) {
		t.Fatalf("settings after a refused request: %v", s)
	}
}

// TestDisplayNameEmailRefused: an address with a display name is refused
// with 422 and a message saying what is wanted.
func TestDisplayNameEmailRefused(t *testing.T) { engines.Each(t, testDisplayNameEmailRefused) }

func testDisplayNameEmailRefused(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	e := obj(r.owner.call("POST", "/api/users/invites", map[string]any{"email": `"Evil" <evil@example.com>`, "name": "E", "role": "user", "auto_groups": []string{}}, 422))
	if !strings.Contains(e["message"].(string), "bare address") {
		t.Fatalf("error %v", e)
	}
}

// TestOldPasswordGuessesLimitedREST: the sixth wrong old password in a
// row is answered 429, even when it is right.
func TestOldPasswordGuessesLimitedREST(t *testing.T) {
	engines.Each(t, testOldPasswordGuessesLimitedREST)
}

func testOldPasswordGuessesLimitedREST(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	for range 5 {
		r.owner.call("PUT", "/api/users/"+r.ownerID+"/password", map[string]string{"old_password": "Wrong-passw0rd!", "new_password": "New-passw0rd!"}, 422)
	}
	r.owner.call("PUT", "/api/users/"+r.ownerID+"/password", map[string]string{"old_password": ownerPassword, "new_password": "New-passw0rd!"}, 429)
}
