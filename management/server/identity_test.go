package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// api is a REST client authenticated as one caller.
type api struct {
	t    testing.TB
	base string
	auth string // Authorization header value
}

func (e *env) api(auth string) api { return api{t: e.t, base: "http://" + e.addr, auth: auth} }

// call sends a request and checks the status; it returns the decoded body.
func (a api) call(method, path string, body any, want int) any {
	a.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		j, _ := json.Marshal(b)
		rd = bytes.NewReader(j)
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	if a.auth != "" {
		req.Header.Set("Authorization", a.auth)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		a.t.Fatalf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, raw)
	}
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") || resp.Header.Get("X-Request-Id") == "" {
		a.t.Fatalf("%s %s: content type %q, request id %q", method, path, resp.Header.Get("Content-Type"), resp.Header.Get("X-Request-Id"))
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		a.t.Fatalf("%s %s: body is not JSON: %s", method, path, raw)
	}
	if want >= 300 {
		m, _ := v.(map[string]any)
		if m["message"] == "" || m["code"] != float64(want) {
			a.t.Fatalf("%s %s: error body %s", method, path, raw)
		}
	}
	return v
}

func obj(v any) map[string]any { m, _ := v.(map[string]any); return m }
func list(v any) []any         { l, _ := v.([]any); return l }

// deviceLogin runs the agent's device flow against whatever provider the
// server describes, approving it as email/password through the
// provider's pages, and returns the access token.
func deviceLogin(t *testing.T, p *testpeer.Peer, email, password string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f, err := p.DeviceFlow(ctx)
	if err != nil {
		t.Fatalf("device flow: %v", err)
	}
	pc := f.GetProviderConfig()
	if pc.GetClientID() == "" || pc.GetAudience() == "" || pc.GetTokenEndpoint() == "" || pc.GetDeviceAuthEndpoint() == "" || pc.GetScope() == "" {
		t.Fatalf("incomplete device flow config: %v", pc)
	}
	cfg := &oauth2.Config{ClientID: pc.GetClientID(), Scopes: strings.Fields(pc.GetScope()),
		Endpoint: oauth2.Endpoint{DeviceAuthURL: pc.GetDeviceAuthEndpoint(), TokenURL: pc.GetTokenEndpoint(), AuthStyle: oauth2.AuthStyleInParams}}
	da, err := cfg.DeviceAuth(ctx, oauth2.SetAuthURLParam("audience", pc.GetAudience()))
	if err != nil {
		t.Fatalf("device authorization: %v", err)
	}
	if err := testoidc.ApproveDevice(nil, da.VerificationURI, da.UserCode, email, password); err != nil {
		t.Fatal(err)
	}
	da.Interval = 1
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatalf("device token: %v", err)
	}
	return tok.AccessToken
}

func TestBuiltInIdentityREST(t *testing.T) { engines.Each(t, testBuiltInIdentityREST) }

func testBuiltInIdentityREST(t *testing.T, eng storetest.Engine) {
	e := startOn(t, eng, server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	anon := e.api("")
	if !obj(anon.call("GET", "/api/instance", nil, 200))["setup_required"].(bool) {
		t.Fatal("setup not required on a new install")
	}
	anon.call("POST", "/api/setup", `{"email":"owner@example.com","password":"short","name":"O"}`, 422)
	anon.call("POST", "/api/setup", `{"email":`, 400)
	setup := obj(anon.call("POST", "/api/setup", map[string]any{"email": "owner@example.com", "password": "Owner-passw0rd!", "name": "Owner", "create_pat": true, "pat_expire_in": 2}, 200))
	pat, _ := setup["personal_access_token"].(string)
	if !strings.HasPrefix(pat, "nbp_") || setup["user_id"] == "" {
		t.Fatalf("setup response %v", setup)
	}
	anon.call("POST", "/api/setup", map[string]any{"email": "second@example.com", "password": "Another-passw0rd!", "name": "Two"}, 412)
	if obj(anon.call("GET", "/api/instance", nil, 200))["setup_required"].(bool) {
		t.Fatal("setup still required after it was done")
	}

	// Authentication: none, garbage, a wrong PAT.
	anon.call("GET", "/api/users", nil, 401)
	e.api("Token nbp_notavalidtoken").call("GET", "/api/users", nil, 401)
	fake := "nbp_" + strings.Repeat("A", 36)
	e.api("Token "+fake).call("GET", "/api/users", nil, 401)
	e.api("Bearer not.a.jwt").call("GET", "/api/users", nil, 401)

	owner := e.api("Token " + pat)
	me := obj(owner.call("GET", "/api/users/current", nil, 200))
	perms := obj(me["permissions"])
	if me["role"] != "owner" || me["email"] != "owner@example.com" || me["is_current"] != true || perms["is_restricted"] != false ||
		obj(obj(perms["modules"])["peers"])["delete"] != true || len(obj(perms["modules"])) < 16 {
		t.Fatalf("current user %v", me)
	}
	// Bad input changes nothing: bad JSON, oversized, hostile strings.
	owner.call("POST", "/api/users", `{"role":`, 400)
	owner.call("POST", "/api/users", `{"role":"user","is_service_user":true,"name":"`+strings.Repeat("x", 2<<20)+`"}`, 413)
	owner.call("POST", "/api/users", map[string]any{"role": "owner", "is_service_user": true, "name": "x"}, 422)
	owner.call("POST", "/api/users", map[string]any{"role": "user", "is_service_user": true, "name": "x", "auto_groups": []string{"nope"}}, 422)
	if n := len(list(owner.call("GET", "/api/users", nil, 200))); n != 1 {
		t.Fatalf("%d users after refused requests", n)
	}
	hostile := `<script>alert(1)</script>'; DROP TABLE users;--`
	svc := obj(owner.call("POST", "/api/users", map[string]any{"role": "admin", "is_service_user": true, "name": hostile, "auto_groups": []string{}}, 200))
	if svc["name"] != hostile || svc["is_service_user"] != true {
		t.Fatalf("service user %v", svc)
	}
	svcID := svc["id"].(string)
	owner.call("POST", "/api/users/"+svcID+"/tokens", map[string]any{"name": "ci", "expires_in": 0}, 422)
	owner.call("POST", "/api/users/"+svcID+"/tokens", map[string]any{"name": "ci", "expires_in": 366}, 422)
	gen := obj(owner.call("POST", "/api/users/"+svcID+"/tokens", map[string]any{"name": "ci", "expires_in": 30}, 200))
	svcPAT := gen["plain_token"].(string)
	tokID := obj(gen["personal_access_token"])["id"].(string)
	toks := list(owner.call("GET", "/api/users/"+svcID+"/tokens", nil, 200))
	if len(toks) != 1 || obj(toks[0])["name"] != "ci" || strings.Contains(string(mustJSON(toks)), svcPAT) {
		t.Fatalf("tokens %v", toks)
	}
	robot := e.api("Token " + svcPAT)
	if obj(robot.call("GET", "/api/users/current", nil, 200))["id"] != svcID {
		t.Fatal("service user's token is someone else")
	}
	owner.call("DELETE", "/api/users/"+svcID+"/tokens/"+tokID, nil, 200)
	robot.call("GET", "/api/users/current", nil, 401)

	// An invitation, accepted with a password, then a device-flow login
	// through the built-in provider.
	inv := obj(owner.call("POST", "/api/users/invites", map[string]any{"email": "dev@example.com", "name": "Dev", "role": "user", "auto_groups": []string{}}, 200))
	invToken := inv["invite_token"].(string)
	owner.call("POST", "/api/users/invites", map[string]any{"email": "DEV@example.com", "name": "Dev", "role": "user", "auto_groups": []string{}}, 409)
	if len(list(owner.call("GET", "/api/users/invites", nil, 200))) != 1 {
		t.Fatal("invites not listed")
	}
	info := obj(anon.call("GET", "/api/users/invites/"+invToken, nil, 200))
	if info["email"] != "dev@example.com" || info["valid"] != true || info["invited_by"] != "Owner" {
		t.Fatalf("invite info %v", info)
	}
	anon.call("GET", "/api/users/invites/nbi_unknown", nil, 404)
	anon.call("POST", "/api/users/invites/"+invToken+"/accept", map[string]string{"password": "weakpassword"}, 422)
	anon.call("POST", "/api/users/invites/"+invToken+"/accept", map[string]string{"password": "Str0ng!pass"}, 200)
	anon.call("POST", "/api/users/invites/"+invToken+"/accept", map[string]string{"password": "Str0ng!pass"}, 404)

	p := testpeer.New(e.conn, "laptop")
	jwt := deviceLogin(t, p, "dev@example.com", "Str0ng!pass")
	dev := e.api("Bearer " + jwt)
	devMe := obj(dev.call("GET", "/api/users/current", nil, 200))
	// Not restricted: regular_users_view_blocked is off by default, so the
	// user sees its own peers.
	if devMe["role"] != "user" || devMe["email"] != "dev@example.com" || obj(devMe["permissions"])["is_restricted"] != false {
		t.Fatalf("invited user %v", devMe)
	}
	// A user sees only itself and its own peers, and manages nobody.
	if us := list(dev.call("GET", "/api/users", nil, 200)); len(us) != 1 {
		t.Fatalf("user sees %d users", len(us))
	}
	dev.call("POST", "/api/users", map[string]any{"role": "user", "is_service_user": true, "name": "x"}, 403)
	dev.call("PUT", "/api/users/"+setup["user_id"].(string), map[string]any{"role": "user", "auto_groups": []string{}, "is_blocked": true}, 403)
	dev.call("GET", "/api/events/audit", nil, 403)

	// The agent logs in with the same token and registers as the user's peer.
	if _, err := p.LoginJWT(context.Background(), jwt); err != nil {
		t.Fatalf("SSO login: %v", err)
	}
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	other := testpeer.New(e.conn, "server")
	if _, err := other.Login(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	if ps := list(dev.call("GET", "/api/peers", nil, 200)); len(ps) != 1 || obj(ps[0])["user_id"] != devMe["id"] || obj(ps[0])["login_expiration_enabled"] != true {
		t.Fatalf("user's peers %v", ps)
	}
	all := list(owner.call("GET", "/api/peers", nil, 200))
	if len(all) != 2 {
		t.Fatalf("owner sees %d peers", len(all))
	}
	for _, x := range all {
		if obj(x)["user_id"] == "" {
			dev.call("GET", "/api/peers/"+obj(x)["id"].(string), nil, 404)
			// As the reference's, the user role deletes no peer at all.
			dev.call("DELETE", "/api/peers/"+obj(x)["id"].(string), nil, 403)
		}
	}

	// Blocking the user: its token stops working, its peer leaves the other
	// peer's map, its own stream ends with PermissionDenied and it cannot
	// log in again.
	ctx := context.Background()
	st, err := other.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mine, err := p.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer mine.Close()
	if err := st.WaitFor(5*time.Second, func([]*mgmtpbSync) bool { return testpeer.HasPeers(st.LatestMap(), p.Public()) }); err != nil {
		t.Fatal("the SSO peer is not in the other peer's map")
	}
	owner.call("PUT", "/api/users/"+devMe["id"].(string), map[string]any{"role": "user", "auto_groups": []string{}, "is_blocked": true}, 200)
	blockedAt := time.Now()
	if err := st.WaitFor(5*time.Second, func([]*mgmtpbSync) bool { return testpeer.HasPeers(st.LatestMap()) }); err != nil {
		t.Fatal("the blocked user's peer is still in the other peer's map")
	}
	t.Logf("blocked user's peer left the map after %v", time.Since(blockedAt).Round(time.Millisecond))
	if err := mine.WaitFor(5*time.Second, func([]*mgmtpbSync) bool { return mine.Err() != nil }); err != nil || status.Code(mine.Err()) != codes.PermissionDenied {
		t.Fatalf("blocked user's stream: %v", mine.Err())
	}
	dev.call("GET", "/api/users/current", nil, 403)
	if _, err := p.LoginJWT(ctx, jwt); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("blocked user's login: %v", err)
	}
	if _, err := p.Login(ctx, ""); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("blocked user's peer login: %v", err)
	}
	events := list(owner.call("GET", "/api/events/audit", nil, 200))
	found := false
	for _, ev := range events {
		found = found || obj(ev)["activity_code"] == "user.block"
	}
	if !found {
		t.Fatal("no user.block event")
	}

	// Deleting the user removes its peer; nobody deletes itself or the owner.
	owner.call("DELETE", "/api/users/"+setup["user_id"].(string), nil, 422)
	owner.call("DELETE", "/api/users/"+devMe["id"].(string), nil, 200)
	owner.call("DELETE", "/api/users/"+devMe["id"].(string), nil, 404)
	if ps := list(owner.call("GET", "/api/peers", nil, 200)); len(ps) != 1 || obj(ps[0])["user_id"] != "" {
		t.Fatalf("peers after the user was deleted: %v", ps)
	}
	owner.call("DELETE", "/api/users/"+svcID, nil, 200)
	if n := len(list(owner.call("GET", "/api/users", nil, 200))); n != 1 {
		t.Fatalf("%d users left, want the owner", n)
	}
}

type mgmtpbSync = mgmtpb.SyncResponse

func mustJSON(v any) []byte { b, _ := json.Marshal(v); return b }
