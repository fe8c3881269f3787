package server_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/server"
)

// FuzzREST sends arbitrary bodies and paths to the REST API as a logged-in
// owner and as nobody: whatever arrives, the answer is a JSON error or a
// success, never a server error.
func FuzzREST(f *testing.F) {
	e := startWith(f, f.TempDir(), server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	setup := `{"email":"owner@example.com","password":"Owner-passw0rd!","name":"Owner","create_pat":true}`
	resp, err := http.Post("http://"+e.addr+"/api/setup", "application/json", strings.NewReader(setup))
	if err != nil {
		f.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	pat := between(string(raw), `"personal_access_token":"`, `"`)
	if pat == "" {
		f.Fatalf("setup: %s", raw)
	}
	for _, s := range []struct{ m, p, b string }{
		{"POST", "/api/users", `{"role":"user","is_service_user":true,"name":"x","auto_groups":[]}`},
		{"POST", "/api/users/invites", `{"email":"a@b.c","name":"n","role":"user","auto_groups":[]}`},
		{"PUT", "/api/users/x", `{"role":"admin","auto_groups":["g"],"is_blocked":true}`},
		{"POST", "/api/users/x/tokens", `{"name":"t","expires_in":400}`},
		{"PUT", "/api/accounts/x", `{"settings":{"peer_login_expiration":-5}}`},
		{"POST", "/api/setup", `{"email":"\u0000","password":null}`},
		{"POST", "/api/users/invites/nbi_x/accept", `{"password":[1,2]}`},
		{"PUT", "/api/peers/%2e%2e", `{"name":"` + strings.Repeat("é", 300) + `"}`},
	} {
		f.Add(s.m, s.p, s.b, true)
	}
	methods := []string{"GET", "POST", "PUT", "DELETE"}
	f.Fuzz(func(t *testing.T, method, path, body string, authed bool) {
		if !strings.HasPrefix(path, "/api/") || strings.ContainsAny(path, " \r\n\t#?") {
			// Escaped: a raw space would make a request line Go's HTTP
			// server refuses before the API sees it.
			path = "/api/users/" + url.PathEscape(path)
		}
		ok := false
		for _, m := range methods {
			ok = ok || m == method
		}
		if !ok {
			method = "POST"
		}
		req, err := http.NewRequest(method, "http://"+e.addr+path, strings.NewReader(body))
		if err != nil {
			return // not a URL a client could send
		}
		if authed {
			req.Header.Set("Authorization", "Token "+pat)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 {
			t.Fatalf("%s %s %q: %d %s", method, path, body, resp.StatusCode, raw)
		}
		if resp.StatusCode >= 400 && !strings.Contains(string(raw), `"message"`) {
			t.Fatalf("%s %s: error without a JSON body: %d %s", method, path, resp.StatusCode, raw)
		}
	})
}

func between(s, from, to string) string {
	_, rest, ok := strings.Cut(s, from)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(rest, to)
	return v
}

// bodyRoutes are the REST writes whose bodies FuzzRESTBodies mutates, one
// per resource and verb; {acc}, {user}, {group}, {policy}, {posture},
// {key} and {peer} are real IDs of the fuzzed account.
var bodyRoutes = []struct{ method, path, seed string }{
	{"POST", "/api/groups", `{"name":"g","peers":[]}`},
	{"PUT", "/api/groups/{group}", `{"name":"g2","peers":["{peer}"]}`},
	{"POST", "/api/policies", `{"name":"p","enabled":true,"rules":[{"name":"r","enabled":true,"action":"accept","bidirectional":true,"protocol":"all","sources":["{group}"],"destinations":["{group}"]}]}`},
	{"PUT", "/api/policies/{policy}", `{"name":"p","enabled":false,"rules":[]}`},
	{"POST", "/api/posture-checks", `{"name":"c","checks":{"nb_version_check":{"min_version":"0.30.0"}}}`},
	{"PUT", "/api/posture-checks/{posture}", `{"name":"c","checks":{"os_version_check":{"linux":{"min_kernel_version":"5.0"}}}}`},
	{"POST", "/api/setup-keys", `{"name":"k","type":"reusable","expires_in":9223372037,"auto_groups":[],"usage_limit":0}`},
	{"PUT", "/api/setup-keys/{key}", `{"revoked":false,"auto_groups":["{group}"]}`},
	{"PUT", "/api/peers/{peer}", `{"name":"n","ssh_enabled":false,"login_expiration_enabled":true}`},
	{"PUT", "/api/accounts/{acc}", `{"settings":{"peer_login_expiration_enabled":true,"peer_login_expiration":9223372037},"claimed_domain":"example.com"}`},
	{"POST", "/api/users", `{"email":"\"Evil\" <e@example.com>","name":"e","role":"user","auto_groups":[],"is_service_user":false}`},
	{"PUT", "/api/users/{user}", `{"role":"user","auto_groups":[],"is_blocked":true}`},
	{"POST", "/api/users/{user}/tokens", `{"name":"t","expires_in":9223372037}`},
	{"POST", "/api/users/invites", `{"email":"a@example.com","name":"a","role":"admin","auto_groups":[],"expires_in":9223372037}`},
	{"PUT", "/api/users/{user}/password", `{"old_password":"x","new_password":"Y-passw0rd!"}`},
	{"POST", "/api/setup", `{"email":"x@example.com","password":"` + strings.Repeat("A1!", 40) + `","name":"x"}`},
	{"POST", "/api/users/invites/nbi_guess/accept", `{"password":"Str0ng!pass"}`},
}

// FuzzRESTBodies sends arbitrary bodies to every resource's POST and PUT
// as the owner: the answer is a success or a JSON error, never a server
// error, and the owner can still use the API afterwards.
func FuzzRESTBodies(f *testing.F) {
	e := startWith(f, f.TempDir(), server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	do := func(method, path, body, auth string) (int, []byte, error) {
		req, err := http.NewRequest(method, "http://"+e.addr+path, strings.NewReader(body))
		if err != nil {
			return 0, nil, err
		}
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		return resp.StatusCode, raw, err
	}
	must := func(method, path, body, auth string) string {
		code, raw, err := do(method, path, body, auth)
		if err != nil || code != 200 {
			f.Fatalf("%s %s: %d %s %v", method, path, code, raw, err)
		}
		return string(raw)
	}
	setup := must("POST", "/api/setup", `{"email":"owner@example.com","password":"Owner-passw0rd!","name":"Owner","create_pat":true}`, "")
	auth := "Token " + between(setup, `"personal_access_token":"`, `"`)
	group := between(must("POST", "/api/groups", `{"name":"seed"}`, auth), `"id":"`, `"`)
	rule := `{"name":"r","enabled":true,"action":"accept","bidirectional":true,"protocol":"all","sources":["` + group + `"],"destinations":["` + group + `"]}`
	ids := map[string]string{
		"{user}":    between(setup, `"user_id":"`, `"`),
		"{acc}":     between(must("GET", "/api/accounts", "", auth), `"id":"`, `"`),
		"{group}":   group,
		"{policy}":  between(must("POST", "/api/policies", `{"name":"seed","enabled":false,"rules":[`+rule+`]}`, auth), `"id":"`, `"`),
		"{posture}": between(must("POST", "/api/posture-checks", `{"name":"seed","checks":{"nb_version_check":{"min_version":"0.1.0"}}}`, auth), `"id":"`, `"`),
		"{key}":     between(must("POST", "/api/setup-keys", `{"name":"seed","type":"reusable","expires_in":3600,"auto_groups":[]}`, auth), `"id":"`, `"`),
		"{peer}":    "no-such-peer",
	}
	fill := func(s string) string {
		for k, v := range ids {
			s = strings.ReplaceAll(s, k, v)
		}
		return s
	}
	for i, r := range bodyRoutes {
		f.Add(uint8(i), fill(r.seed))
	}
	f.Fuzz(func(t *testing.T, route uint8, body string) {
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		path := fill(r.path)
		code, raw, err := do(r.method, path, body, auth)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, path, err)
		}
		if code >= 500 {
			t.Fatalf("%s %s %q: %d %s", r.method, path, body, code, raw)
		}
		if code >= 400 && !strings.Contains(string(raw), `"message"`) {
			t.Fatalf("%s %s: error without a JSON body: %d %s", r.method, path, code, raw)
		}
		if code, raw, err := do("GET", "/api/users/current", "", auth); err != nil || code != 200 {
			t.Fatalf("after %s %s %q the owner is locked out: %d %s %v", r.method, path, body, code, raw, err)
		}
	})
}
