package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"

	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/dashboard"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/users"
)

func getRaw(t *testing.T, c *http.Client, u string) (*http.Response, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// TestDashboardBuiltIn: the server serves the dashboard beside the API and
// the built-in provider, and its settings name the provider's dashboard
// client, which accepts the login callback of the dashboard on the
// server's own origin without any flag: a person logs in through it and
// the code comes back to <base>/nb-auth.
func TestDashboardBuiltIn(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	base := "http://" + e.addr

	resp, body := getRaw(t, http.DefaultClient, base+dashboard.ConfigPath)
	var cfg dashboard.Config
	if err := json.Unmarshal([]byte(body), &cfg); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", dashboard.ConfigPath, resp.StatusCode, body)
	}
	if want := (dashboard.Config{Issuer: base + "/oauth2", ClientID: "netbird-dashboard", Audience: "netbird-dashboard"}); cfg != want {
		t.Fatalf("config %+v, want %+v", cfg, want)
	}

	// The app's routes are the dashboard's; the API's and the provider's
	// are not shadowed.
	if resp, body := getRaw(t, http.DefaultClient, base+"/peers"); resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") ||
		!strings.Contains(body, "<html") {
		t.Fatalf("/peers: %d %s %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if resp, body := getRaw(t, http.DefaultClient, base+"/api/peers"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"code":401`) {
		t.Fatalf("/api/peers without a token: %d %s", resp.StatusCode, body)
	}
	if resp, body := getRaw(t, http.DefaultClient, base+"/api/no-such-thing"); resp.StatusCode == 200 || strings.Contains(body, "<html") {
		t.Fatalf("/api/no-such-thing: %d %.200s", resp.StatusCode, body)
	}
	if resp, body := getRaw(t, http.DefaultClient, base+"/oauth2/.well-known/openid-configuration"); resp.StatusCode != 200 || !strings.Contains(body, `"issuer"`) {
		t.Fatalf("discovery: %d %.200s", resp.StatusCode, body)
	}

	// The default callback: a full login comes back to <base>/nb-auth.
	ctx := context.Background()
	const email, pw = "owner@example.com", "Dashb0ard!pw"
	if _, _, err := e.srv.Users.Setup(ctx, users.SetupInput{Email: email, Password: pw, Name: "Owner"}); err != nil {
		t.Fatal(err)
	}
	ep := e.srv.IdP.Endpoints()
	conf := &oauth2.Config{ClientID: cfg.ClientID, RedirectURL: base + idp.DashboardCallbackPath, Scopes: []string{"openid", "email", "offline_access"},
		Endpoint: oauth2.Endpoint{AuthURL: ep.Authorization, TokenURL: ep.Token, AuthStyle: oauth2.AuthStyleInParams}}
	verifier := oauth2.GenerateVerifier()
	back := browserLogin(t, conf.AuthCodeURL("st4te", oauth2.S256ChallengeOption(verifier)), email, pw)
	if back.Query().Get("state") != "st4te" || back.Query().Get("code") == "" {
		t.Fatalf("login came back to %s", back)
	}
	if _, err := conf.Exchange(ctx, back.Query().Get("code"), oauth2.VerifierOption(verifier)); err != nil {
		t.Fatalf("code exchange: %v", err)
	}

	// Another origin's callback is not accepted without --dashboard-redirect.
	evil := *conf
	evil.RedirectURL = "http://evil.example" + idp.DashboardCallbackPath
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, body = getRaw(t, noFollow, evil.AuthCodeURL("s", oauth2.S256ChallengeOption(verifier)))
	if loc := resp.Header.Get("Location"); strings.HasPrefix(loc, "http://evil.example") || resp.StatusCode < 400 && !strings.Contains(loc, "error") {
		t.Fatalf("unregistered callback: %d to %q: %.200s", resp.StatusCode, loc, body)
	}
}

// browserLogin follows an authorization URL through the provider's login
// page as a browser does, and returns the callback URL it is sent to (a
// path of the dashboard on the same origin).
func browserLogin(t *testing.T, authURL, email, password string) *url.URL {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	var back *url.URL
	c := &http.Client{Jar: jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == idp.DashboardCallbackPath {
			back = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	resp, body := getRaw(t, c, authURL)
	id := resp.Request.URL.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("authorization did not lead to the login page: %s (%d): %.300s", resp.Request.URL, resp.StatusCode, body)
	}
	post := *resp.Request.URL
	post.RawQuery = ""
	resp, err := c.PostForm(post.String(), url.Values{"authRequestID": {id}, "email": {email}, "password": {password}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if back == nil {
		t.Fatalf("login did not come back to the dashboard: %s: %.300s", resp.Status, b)
	}
	return back
}

// TestDashboardExternal: with an external provider the settings name its
// issuer and the dashboard's own client (default: the agents' client),
// and the audience is the one the server accepts.
func TestDashboardExternal(t *testing.T) {
	for _, c := range []struct {
		name string
		id   server.Identity
		want dashboard.Config
	}{
		{name: "own client", id: server.Identity{Issuer: "https://idp.example.com/realms/x", ClientID: "agents", DashboardClientID: "dash"},
			want: dashboard.Config{Issuer: "https://idp.example.com/realms/x", ClientID: "dash", Audience: "dash"}},
		{name: "agents' client", id: server.Identity{Issuer: "https://idp.example.com/realms/x", ClientID: "agents"},
			want: dashboard.Config{Issuer: "https://idp.example.com/realms/x", ClientID: "agents", Audience: "agents"}},
		{name: "explicit audience", id: server.Identity{Issuer: "https://tenant.auth0.example/", ClientID: "agents", DashboardClientID: "dash", Audiences: []string{"https://api.example"}},
			want: dashboard.Config{Issuer: "https://tenant.auth0.example/", ClientID: "dash", Audience: "https://api.example"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := startWith(t, t.TempDir(), server.Options{Identity: c.id})
			resp, body := getRaw(t, http.DefaultClient, "http://"+e.addr+dashboard.ConfigPath)
			var got dashboard.Config
			if err := json.Unmarshal([]byte(body), &got); err != nil || resp.StatusCode != 200 || got != c.want {
				t.Fatalf("%d %s, want %+v", resp.StatusCode, body, c.want)
			}
		})
	}
	// No login configured: the file is missing, with the reason.
	e := startWith(t, t.TempDir(), server.Options{})
	if resp, body := getRaw(t, http.DefaultClient, "http://"+e.addr+dashboard.ConfigPath); resp.StatusCode != 404 || !strings.Contains(body, "--oidc-issuer") {
		t.Fatalf("no login: %d %s", resp.StatusCode, body)
	}
}

// TestIssuerWithoutPath: a built-in issuer with no path holds "/" itself;
// the server starts (registering "/" twice for the dashboard panicked)
// and serves the provider's discovery there.
func TestIssuerWithoutPath(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuerRoot}})
	resp, err := http.Get("http://" + e.addr + "/.well-known/openid-configuration")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("discovery at the root issuer: %d", resp.StatusCode)
	}
}
