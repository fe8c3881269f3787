package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"regexp"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/testoidc"
)

// The management REST API as tests and benchmarks (bench/) drive it: as
// the owner the all-in-one server creates on first start.

// nsClient is an HTTP client whose connections start in namespace ns (a
// person's browser on that network).
func nsClient(ns string) *http.Client {
	return &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := netlab.Do(ns, func() error {
				var err error
				c, err = (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		}}}
}

// restClient calls the management REST API from the public segment.
type restClient struct {
	t    *testing.T
	c    *http.Client
	auth string
}

func (r restClient) call(method, path string, body any, want int) map[string]any {
	r.t.Helper()
	raw, status := r.do(method, path, body)
	if status != want {
		r.t.Fatalf("%s %s: %d, want %d: %s", method, path, status, want, raw)
	}
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	return m
}

// do sends a request (body as JSON, if any) and returns the raw answer
// and its status.
func (r restClient) do(method, path string, body any) ([]byte, int) {
	r.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, "http://"+netlab.PubAddr+":"+mgmtPort+path, rd)
	if r.auth != "" {
		req.Header.Set("Authorization", r.auth)
	}
	resp, err := r.c.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return raw, resp.StatusCode
}

// ownerToken logs the owner in through the built-in provider's device
// flow and returns a personal access token for the REST API.
func (m *Mesh) ownerToken(email, password string) (restClient, string) {
	t := m.t
	pub := nsClient(m.Lab.NS("pub"))
	issuer := "http://" + netlab.PubAddr + ":" + mgmtPort + "/oauth2"
	ctx := context.WithValue(context.Background(), oauth2.HTTPClient, pub)
	cfg := &oauth2.Config{ClientID: "netbird-client", Scopes: []string{"openid", "email", "profile"},
		Endpoint: oauth2.Endpoint{DeviceAuthURL: issuer + "/device_authorization", TokenURL: issuer + "/oauth/token", AuthStyle: oauth2.AuthStyleInParams}}
	da, err := cfg.DeviceAuth(ctx)
	if err != nil {
		t.Fatalf("owner device login: %v", err)
	}
	if err := testoidc.ApproveDevice(pub, da.VerificationURI, da.UserCode, email, password); err != nil {
		t.Fatal(err)
	}
	da.Interval = 1
	tok, err := cfg.DeviceAccessToken(ctx, da)
	if err != nil {
		t.Fatal(err)
	}
	r := restClient{t: t, c: pub, auth: "Bearer " + tok.AccessToken}
	me := r.call("GET", "/api/users/current", nil, 200)
	id := me["id"].(string)
	pat := r.call("POST", "/api/users/"+id+"/tokens", map[string]any{"name": "e2e", "expires_in": 1}, 200)["plain_token"].(string)
	return restClient{t: t, c: pub, auth: "Token " + pat}, id
}

// getList reads a REST collection (a JSON array of objects).
func getList(t *testing.T, r restClient, path string) []map[string]any {
	t.Helper()
	raw, _ := r.do("GET", path, nil)
	var out []map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	return out
}

// adminOf is the owner's REST client of a fresh mesh.
func (m *Mesh) adminOf(t *testing.T) restClient {
	t.Helper()
	owner := m.Server.Wait(t, regexp.MustCompile(`Owner created:\s+(\S+), initial password (\S+) `), 5*time.Second)
	admin, _ := m.ownerToken(owner[1], owner[2])
	return admin
}

// idOf finds the ID of the object named name in a REST collection.
func idOf(t *testing.T, admin restClient, path, name string) string {
	t.Helper()
	for _, o := range getList(t, admin, path) {
		if o["name"] == name {
			id, _ := o["id"].(string)
			return id
		}
	}
	t.Fatalf("GET %s: no object named %q", path, name)
	return ""
}

// API is the owner's REST client, for benchmarks outside this package.
type API struct{ r restClient }

// OwnerAPI logs in as the owner the server created on its first start.
func (m *Mesh) OwnerAPI(t *testing.T) API { return API{m.adminOf(t)} }

// Call sends a request and fails the test unless the status is want; it
// returns the decoded JSON object of the answer.
func (a API) Call(method, path string, body any, want int) map[string]any {
	return a.r.call(method, path, body, want)
}

// IDOf is the ID of the object named name in the REST collection at path.
func (a API) IDOf(path, name string) string { return idOf(a.r.t, a.r, path, name) }
