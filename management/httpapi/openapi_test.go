package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/dnsadmin"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/jobs"
	"github.com/wiremesh/wiremesh/management/livefeed"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/routing"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/updates"
	"github.com/wiremesh/wiremesh/management/users"
)

// loadDoc fetches the document the server serves, without credentials,
// and checks it is a valid OpenAPI 3 document.
func loadDoc(t *testing.T, base string) *openapi3.T {
	t.Helper()
	resp, err := http.Get(base + "/api/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json") {
		t.Fatalf("GET /api/openapi.json: %d %s: %.200s", resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		t.Fatalf("openapi.json does not load: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	return doc
}

func servedDoc(t *testing.T) *openapi3.T {
	t.Helper()
	srv := httptest.NewServer(httpapi.New(httpapi.Options{}))
	t.Cleanup(srv.Close)
	return loadDoc(t, srv.URL)
}

// TestOpenAPIMatchesRouter walks every route of the router against the
// document and every operation of the document against the router,
// public (no security) included.
func TestOpenAPIMatchesRouter(t *testing.T) {
	doc := servedDoc(t)
	documented := map[string]bool{} // "GET /api/x" -> public
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			documented[method+" "+path] = op.Security != nil && len(*op.Security) == 0
		}
	}
	served := map[string]bool{}
	for _, rt := range httpapi.New(httpapi.Options{}).Routes() {
		served[rt.Method+" "+rt.Path] = rt.Public
	}
	var problems []string
	for op, public := range served {
		dp, ok := documented[op]
		switch {
		case !ok:
			problems = append(problems, op+": served but not in openapi.json")
		case dp != public:
			problems = append(problems, fmt.Sprintf("%s: public=%v in the router, %v in openapi.json (security: [])", op, public, dp))
		}
	}
	for op := range documented {
		if _, ok := served[op]; !ok {
			problems = append(problems, op+": in openapi.json but not served")
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		t.Fatalf("router and management/httpapi/openapi.json disagree:\n%s", strings.Join(problems, "\n"))
	}
}

// docRig is the REST API on a real store of one engine whose every call is
// checked against the document: the request against the operation's
// parameters and body schema, the response against its status and schema.
type docRig struct {
	t       *testing.T
	st      *store.Store
	url     string
	doc     *openapi3.T
	token   string              // the owner's personal access token
	secrets *secretbox.Box      // seals identity providers' client secrets
	covered map[string]struct{} // "GET /api/x" answered 2xx
	tried   map[string]struct{} // "GET /api/x" called at all
}

func newDocRig(t *testing.T, eng storetest.Engine, opts ...func(*httpapi.Options)) *docRig {
	t.Helper()
	st := eng.Open(t)
	hub := updates.NewHub()
	box, err := secretbox.New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	o := httpapi.Options{Store: st, Users: users.New(users.Options{Store: st, Notify: hub, LocalIdP: true}),
		Peers: peers.New(st, hub, nil, nil), Access: access.New(st, hub, nil), IdPs: &idp.Providers{Store: st, Secrets: box}, Jobs: jobs.New(jobs.Options{Store: st}),
		Routing: routing.New(st, hub, routing.Options{}), DNS: dnsadmin.New(st, hub, dnsadmin.Options{}), Live: livefeed.New(livefeed.Options{})}
	for _, f := range opts {
		f(&o)
	}
	srv := httptest.NewServer(httpapi.New(o))
	t.Cleanup(srv.Close)
	return &docRig{t: t, st: st, url: srv.URL, doc: loadDoc(t, srv.URL), secrets: box, covered: map[string]struct{}{}, tried: map[string]struct{}{}}
}

// call sends method to target (a concrete URL path with query) as the
// operation docPath, checks request and response against the document
// and the status against want, and returns the decoded body.
func (d *docRig) call(method, docPath, target string, body any, want int) any {
	return d.callAs(d.token, method, docPath, target, body, want)
}

func (d *docRig) callAs(token, method, docPath, target string, body any, want int) any {
	t := d.t
	t.Helper()
	var raw []byte
	contentType, auth := "", ""
	if body != nil {
		raw, _ = json.Marshal(body)
		contentType = "application/json"
	}
	if token != "" {
		auth = "Token " + token
	}
	got := d.callBytes(auth, method, docPath, target, contentType, raw, want)
	var v any
	if err := json.Unmarshal(got, &v); err != nil {
		t.Fatalf("%s %s: body is not JSON: %s", method, target, got)
	}
	return v
}

// route finds docPath's operation and the path parameters of target.
func (d *docRig) route(method, docPath, target string) (*routers.Route, map[string]string) {
	d.t.Helper()
	item := d.doc.Paths.Value(docPath)
	if item == nil || item.GetOperation(method) == nil {
		d.t.Fatalf("openapi.json has no operation %s %s", method, docPath)
	}
	u, _ := url.Parse(target)
	tmpl, segs := strings.Split(docPath, "/"), strings.Split(u.Path, "/")
	if len(tmpl) != len(segs) {
		d.t.Fatalf("%s does not fit %s", target, docPath)
	}
	params := map[string]string{}
	for i, s := range tmpl {
		if strings.HasPrefix(s, "{") {
			params[strings.Trim(s, "{}")] = segs[i]
		} else if s != segs[i] {
			d.t.Fatalf("%s does not fit %s", target, docPath)
		}
	}
	return &routers.Route{Spec: d.doc, Path: docPath, PathItem: item, Method: method, Operation: item.GetOperation(method)}, params
}

func str(v any, field string) string { s, _ := obj(v)[field].(string); return s }

// TestOpenAPIOperationsConform drives every operation of the document on
// a real server with a valid request and checks each request and response
// against the document's schemas (required fields present, types right,
// no field the document does not name); errors against ErrorResponse.
func TestOpenAPIOperationsConform(t *testing.T) { engines.Each(t, testOpenAPIOperationsConform) }

func testOpenAPIOperationsConform(t *testing.T, eng storetest.Engine) {
	d := newDocRig(t, eng)
	ctx := context.Background()

	// Instance and setup.
	if inst := obj(d.call("GET", "/api/instance", "/api/instance", nil, 200)); inst["setup_required"] != true {
		t.Fatalf("instance before setup: %v", inst)
	}
	setup := d.call("POST", "/api/setup", "/api/setup", map[string]any{"email": "owner@example.com", "password": ownerPassword, "name": "Owner", "create_pat": true}, 200)
	d.token = str(setup, "personal_access_token")
	ownerID := str(setup, "user_id")
	d.call("POST", "/api/setup", "/api/setup", map[string]any{"email": "again@example.com", "password": ownerPassword, "name": "Again"}, 412)
	d.call("GET", "/api/openapi.json", "/api/openapi.json", nil, 200)

	// Errors keep the {message, code} body.
	d.callAs("", "GET", "/api/users", "/api/users", nil, 401)
	d.call("GET", "/api/users/{userId}", "/api/users/nobody", nil, 404)
	d.call("POST", "/api/groups", "/api/groups", map[string]any{"name": ""}, 422)

	// Users.
	d.call("GET", "/api/users", "/api/users", nil, 200)
	d.call("GET", "/api/users/current", "/api/users/current", nil, 200)
	svc := str(d.call("POST", "/api/users", "/api/users", map[string]any{"name": "robot", "role": "user", "auto_groups": []string{}, "is_service_user": true}, 200), "id")
	if l := list(d.call("GET", "/api/users", "/api/users?service_user=true", nil, 200)); len(l) != 1 || str(l[0], "id") != svc {
		t.Fatalf("service_user=true: %v, want only %s", l, svc)
	}
	if l := list(d.call("GET", "/api/users", "/api/users?service_user=false", nil, 200)); len(l) != 1 || str(l[0], "id") != ownerID {
		t.Fatalf("service_user=false: %v, want only the owner", l)
	}
	d.call("GET", "/api/users/{userId}", "/api/users/"+svc, nil, 200)
	d.call("PUT", "/api/users/{userId}", "/api/users/"+svc, map[string]any{"role": "admin", "auto_groups": []string{}, "is_blocked": false}, 200)

	// Personal access tokens.
	tok := obj(d.call("POST", "/api/users/{userId}/tokens", "/api/users/"+ownerID+"/tokens", map[string]any{"name": "ci", "expires_in": 30}, 200))
	tokID := str(tok["personal_access_token"], "id")
	d.call("GET", "/api/users/{userId}/tokens", "/api/users/"+ownerID+"/tokens", nil, 200)
	d.call("GET", "/api/users/{userId}/tokens/{tokenId}", "/api/users/"+ownerID+"/tokens/"+tokID, nil, 200)
	d.call("DELETE", "/api/users/{userId}/tokens/{tokenId}", "/api/users/"+ownerID+"/tokens/"+tokID, nil, 200)

	// Invites.
	inv := d.call("POST", "/api/users/invites", "/api/users/invites", map[string]any{"email": "dev@example.com", "name": "Dev", "role": "user", "auto_groups": []string{}}, 200)
	d.call("GET", "/api/users/invites", "/api/users/invites", nil, 200)
	regen := d.call("POST", "/api/users/invites/{inviteId}/regenerate", "/api/users/invites/"+str(inv, "id")+"/regenerate", map[string]any{"expires_in": 3600}, 200)
	d.callAs("", "GET", "/api/users/invites/{inviteId}", "/api/users/invites/"+str(regen, "invite_token"), nil, 200)
	d.callAs("", "POST", "/api/users/invites/{token}/accept", "/api/users/invites/"+str(regen, "invite_token")+"/accept", map[string]any{"password": "Dev-passw0rd!"}, 200)
	gone := d.call("POST", "/api/users/invites", "/api/users/invites", map[string]any{"email": "gone@example.com", "name": "Gone", "role": "user", "auto_groups": []string{}}, 200)
	d.call("DELETE", "/api/users/invites/{inviteId}", "/api/users/invites/"+str(gone, "id"), nil, 200)

	// Account.
	acc := str(list(d.call("GET", "/api/accounts", "/api/accounts", nil, 200))[0], "id")
	d.call("PUT", "/api/accounts/{accountId}", "/api/accounts/"+acc, map[string]any{"settings": map[string]any{"peer_login_expiration_enabled": true, "peer_login_expiration": 172800,
		"peer_inactivity_expiration_enabled": false, "peer_inactivity_expiration": 0, "regular_users_view_blocked": false, "peer_expose_enabled": false,
		"peer_expose_groups": []string{}}}, 200)

	// Groups, setup keys and a peer registered with one.
	grp := str(d.call("POST", "/api/groups", "/api/groups", map[string]any{"name": "devs", "peers": []string{}}, 200), "id")
	d.call("GET", "/api/groups", "/api/groups", nil, 200)
	if l := list(d.call("GET", "/api/groups", "/api/groups?name=devs", nil, 200)); len(l) != 1 || str(l[0], "id") != grp {
		t.Fatalf("groups?name=devs: %v", l)
	}
	d.call("GET", "/api/groups", "/api/groups?name=nosuch", nil, 404)
	sk := d.call("POST", "/api/setup-keys", "/api/setup-keys", map[string]any{"name": "laptops", "type": "reusable", "expires_in": 86400, "auto_groups": []string{grp}}, 200)
	d.call("GET", "/api/setup-keys", "/api/setup-keys", nil, 200)
	d.call("GET", "/api/setup-keys/{keyId}", "/api/setup-keys/"+str(sk, "id"), nil, 200)
	d.call("PUT", "/api/setup-keys/{keyId}", "/api/setup-keys/"+str(sk, "id"), map[string]any{"revoked": false, "auto_groups": []string{grp}}, 200)
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := peers.New(d.st, updates.NewHub(), nil, nil).Login(ctx, peers.LoginInput{Key: priv.Public(), SetupKey: str(sk, "key"),
		Meta: account.Meta{Hostname: "laptop-1", OS: "linux", NetbirdVersion: "0.77.1"}})
	if err != nil {
		t.Fatal(err)
	}
	peer := string(p.ID)
	d.call("GET", "/api/peers", "/api/peers", nil, 200)
	if l := list(d.call("GET", "/api/peers", "/api/peers?name="+url.QueryEscape(p.Name), nil, 200)); len(l) != 1 {
		t.Fatalf("peers?name=%s: %v", p.Name, l)
	}
	if l := list(d.call("GET", "/api/peers", "/api/peers?ip="+p.IP.String(), nil, 200)); len(l) != 1 {
		t.Fatalf("peers?ip=%s: %v", p.IP, l)
	}
	if l := list(d.call("GET", "/api/peers", "/api/peers?name=nosuch", nil, 200)); len(l) != 0 {
		t.Fatalf("peers?name=nosuch: %v", l)
	}
	d.call("GET", "/api/peers/{peerId}", "/api/peers/"+peer, nil, 200)
	d.call("PUT", "/api/peers/{peerId}", "/api/peers/"+peer, map[string]any{"name": "laptop-one", "ssh_enabled": false, "login_expiration_enabled": true}, 200)
	d.call("GET", "/api/groups/{groupId}", "/api/groups/"+grp, nil, 200)
	d.call("PUT", "/api/groups/{groupId}", "/api/groups/"+grp, map[string]any{"name": "devs", "peers": []string{peer}}, 200)

	// Posture checks and policies.
	pc := str(d.call("POST", "/api/posture-checks", "/api/posture-checks", map[string]any{"name": "recent", "checks": map[string]any{"nb_version_check": map[string]any{"min_version": "0.30.0"}}}, 200), "id")
	d.call("GET", "/api/posture-checks", "/api/posture-checks", nil, 200)
	d.call("GET", "/api/posture-checks/{postureCheckId}", "/api/posture-checks/"+pc, nil, 200)
	d.call("PUT", "/api/posture-checks/{postureCheckId}", "/api/posture-checks/"+pc, map[string]any{"name": "recent", "description": "0.40 or later", "checks": map[string]any{"nb_version_check": map[string]any{"min_version": "0.40.0"}}}, 200)
	rule := map[string]any{"name": "ssh", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"22"}, "sources": []string{grp}, "destinations": []string{grp}}
	pol := str(d.call("POST", "/api/policies", "/api/policies", map[string]any{"name": "ssh", "enabled": true, "source_posture_checks": []string{pc}, "rules": []any{rule}}, 200), "id")
	peerRule := map[string]any{"name": "to one", "enabled": true, "action": "accept", "bidirectional": true, "protocol": "all", "sources": []string{grp}, "destinationResource": map[string]any{"id": peer, "type": "peer"}}
	toOne := str(d.call("POST", "/api/policies", "/api/policies", map[string]any{"name": "to one", "enabled": true, "rules": []any{peerRule}}, 200), "id")
	d.call("GET", "/api/policies", "/api/policies", nil, 200)
	d.call("GET", "/api/policies/{policyId}", "/api/policies/"+pol, nil, 200)
	d.call("PUT", "/api/policies/{policyId}", "/api/policies/"+pol, map[string]any{"name": "ssh", "enabled": false, "rules": []any{rule}}, 200)
	d.call("DELETE", "/api/policies/{policyId}", "/api/policies/"+pol, nil, 200)
	d.call("DELETE", "/api/policies/{policyId}", "/api/policies/"+toOne, nil, 200)
	d.call("DELETE", "/api/posture-checks/{postureCheckId}", "/api/posture-checks/"+pc, nil, 200)

	d.call("GET", "/api/locations/countries", "/api/locations/countries", nil, 200)
	codes := map[string]bool{}
	for _, e := range list(d.call("GET", "/api/events/audit", "/api/events/audit", nil, 200)) {
		code := str(e, "activity_code")
		codes[code] = true
		if text, ok := account.Activities[code]; !ok || str(e, "activity") != text {
			t.Errorf("event %v: code unknown or activity not its text %q", e, text)
		}
	}
	for _, want := range []string{"user.create", "service.user.create", "user.role.update", "personal.access.token.create", "user.invite.link.accept",
		"group.add", "setupkey.add", "peer.setupkey.add", "peer.rename", "account.setting.peer.login.expiration.update", "posture.check.create", "policy.add"} {
		if !codes[want] {
			t.Errorf("no %s among the events' codes %v", want, codes)
		}
	}
	d.call("GET", "/api/events", "/api/events", nil, 200)

	// Deletions and the password last: the owner's token outlives a password change.
	d.call("DELETE", "/api/peers/{peerId}", "/api/peers/"+peer, nil, 200)
	d.call("DELETE", "/api/setup-keys/{keyId}", "/api/setup-keys/"+str(sk, "id"), nil, 200)
	d.call("PUT", "/api/groups/{groupId}", "/api/groups/"+grp, map[string]any{"name": "devs"}, 200)
	d.call("DELETE", "/api/groups/{groupId}", "/api/groups/"+grp, nil, 200)
	d.call("DELETE", "/api/users/{userId}", "/api/users/"+svc, nil, 200)
	d.call("PUT", "/api/users/{userId}/password", "/api/users/"+ownerID+"/password", map[string]any{"old_password": ownerPassword, "new_password": "New-passw0rd!!"}, 200)

	conformExtra(t, d, ownerID)
	conformIdPs(t, d)

	// The install's own account (built-in provider) is never deleted over
	// the API: it would reopen setup (management/server TestDeleteAccountREST
	// deletes one for real).
	d.call("DELETE", "/api/accounts/{accountId}", "/api/accounts/"+acc, nil, 412)
	d.call("GET", "/api/users/current", "/api/users/current", nil, 200)

	var missing []string
	for path, item := range d.doc.Paths.Map() {
		for method := range item.Operations() {
			_, ok := d.covered[method+" "+path]
			if _, tried := d.tried[method+" "+path]; tried && neverOK[method+" "+path] {
				ok = true // answered with the error the document declares
			}
			if !ok {
				missing = append(missing, method+" "+path)
			}
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("operations of openapi.json this test never drove to a 2xx answer (add them to TestOpenAPIOperationsConform or conformExtra):\n%s", strings.Join(missing, "\n"))
	}
}

// TestWrongMethodAndUnknownPath: a path served under other methods answers
// 405 with Allow; an unknown /api path 404; both with {message, code}.
func TestWrongMethodAndUnknownPath(t *testing.T) { engines.Each(t, testWrongMethodAndUnknownPath) }

func testWrongMethodAndUnknownPath(t *testing.T, eng storetest.Engine) {
	d := newDocRig(t, eng)
	for _, c := range []struct {
		method, path string
		want         int
		allow        []string
	}{
		{"PATCH", "/api/peers/abc", 405, []string{"GET", "PUT", "DELETE", "HEAD"}},
		{"POST", "/api/instance", 405, []string{"GET", "HEAD"}},
		{"DELETE", "/api/users", 405, []string{"GET", "POST", "HEAD"}},
		{"GET", "/api/nosuch", 404, nil},
		{"GET", "/api/peers/abc/nosuch", 404, nil},
		{"GET", "/api/peers/", 404, nil},
		// A literal segment beats a parameter: this is the public invite
		// lookup of token "tokens" (404), not user invites' token list (401).
		{"GET", "/api/users/invites/tokens", 404, nil},
		{"GET", "/api/users/sso%7Cdev/tokens", 401, nil},
	} {
		req, _ := http.NewRequest(c.method, d.url+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Message string `json:"message"`
			Code    int    `json:"code"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != c.want || err != nil || body.Code != c.want || body.Message == "" {
			t.Errorf("%s %s: %d %+v (%v), want %d with {message, code}", c.method, c.path, resp.StatusCode, body, err, c.want)
		}
		var allow []string
		if h := resp.Header.Get("Allow"); h != "" {
			allow = strings.Split(h, ", ")
		}
		slices.Sort(allow)
		slices.Sort(c.allow)
		if !slices.Equal(allow, c.allow) {
			t.Errorf("%s %s: Allow %q, want %q", c.method, c.path, allow, c.allow)
		}
	}
}
