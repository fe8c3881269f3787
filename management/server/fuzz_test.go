package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/server"
)

// FuzzREST sends arbitrary bodies and paths to the REST API as a logged-in
// owner and as nobody: whatever arrives, the answer is a JSON error or a
// success, never a server error.
func FuzzREST(f *testing.F) {
	e := startWith(f, f.TempDir(), server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	setup := `{"email":"owner@example.com","password":"owner-password-1","name":"Owner","create_pat":true}`
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
			path = "/api/users/" + path
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
