package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// caller is a user of the rig's account with a personal access token.
type caller struct {
	id, token string
	user      account.User
}

// addCaller stores a user of the owner's account with a role and a token.
func (r *rig) addCaller(id string, role account.Role, service bool) caller {
	r.t.Helper()
	ctx := context.Background()
	plain, hash, err := auth.NewPAT()
	if err != nil {
		r.t.Fatal(err)
	}
	var u account.User
	err = r.st.Tx(ctx, func(tx *store.Tx) error {
		owner, err := tx.UserByID(ctx, account.UserID(r.ownerID))
		if err != nil {
			return err
		}
		now := time.Now().UTC()
		u = account.User{ID: account.UserID(id), AccountID: owner.AccountID, Email: id + "@example.com", Name: id, Role: role, ServiceUser: service,
			AutoGroups: []string{}, Issued: "api", CreatedAt: now}
		at := tx.In(owner.AccountID)
		if err := at.InsertUser(ctx, u); err != nil {
			return err
		}
		return at.InsertToken(ctx, account.Token{ID: account.TokenID("tok-" + id), AccountID: owner.AccountID, UserID: u.ID, Name: "t", Hash: hash,
			ExpiresAt: now.Add(time.Hour), CreatedBy: u.ID, CreatedAt: now})
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return caller{id: id, token: "Token " + plain, user: u}
}

// do sends one request and returns the status and body.
func (r *rig) do(method, path, authz string, body string) (int, []byte) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, r.url+path, rd)
	req.Header.Set("Authorization", authz)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, raw
}

// TestRouteRoleTable walks every authenticated route of the router with
// every role (and a service user) and checks that the route is refused
// with 403 exactly when package auth's table denies the role the route's
// module and operation. A route without a permission entry fails here.
func TestRouteRoleTable(t *testing.T) { engines.Each(t, testRouteRoleTable) }

func testRouteRoleTable(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	var owner account.User
	_ = r.st.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		owner, err = tx.UserByID(context.Background(), account.UserID(r.ownerID))
		return err
	})
	callers := []caller{{id: r.ownerID, token: r.owner.auth, user: owner}}
	for _, role := range account.Roles {
		if role != account.RoleOwner {
			callers = append(callers, r.addCaller("as-"+string(role), role, false))
		}
	}
	callers = append(callers, r.addCaller("service-user", account.RoleUser, true))

	routes := httpapi.New(httpapi.Options{}).Routes()
	served := map[string]bool{}
	var missing []string
	for _, rt := range routes {
		served[rt.Method+" "+rt.Path] = true
		if _, _, _, _, ok := httpapi.PermOf(rt); !ok && !rt.Public {
			missing = append(missing, rt.Method+" "+rt.Path)
		}
	}
	var stale []string
	for _, k := range httpapi.PermEntries() {
		if !served[k] {
			stale = append(stale, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(stale)
	if len(missing) > 0 || len(stale) > 0 {
		t.Fatalf("permission table (management/httpapi/permissions.go) and router disagree:\nroutes without an entry: %v\nentries without a route: %v", missing, stale)
	}

	for _, rt := range routes {
		if rt.Public {
			continue
		}
		module, op, self, every, _ := httpapi.PermOf(rt)
		for _, c := range callers {
			path := pathFor(rt.Path, c.id)
			name := rt.Method + " " + rt.Path + " as " + c.id
			status, body := r.do(rt.Method, path, c.token, bodyFor(rt.Method))
			scope := auth.Can(c.user, auth.Module(module), auth.Operation(op))
			allowed := self || scope == auth.All || (scope == auth.Own && !every)
			switch {
			case status == http.StatusUnauthorized || status >= 500:
				t.Errorf("%s: %d %s", name, status, body)
			case allowed && status == http.StatusForbidden:
				t.Errorf("%s: refused (403 %s), but the table grants %s %s", name, body, op, module)
			case !allowed && status != http.StatusForbidden:
				t.Errorf("%s: %d %s, but the table denies %s %s", name, status, body, op, module)
			case !allowed:
				var e struct{ Message string }
				if json.Unmarshal(body, &e) != nil || !strings.Contains(e.Message, string(c.user.Role)) {
					t.Errorf("%s: 403 body %s does not name the role", name, body)
				}
			}
		}
	}
}

// pathFor fills a route template: the caller's own ID for a user, an ID
// that does not exist for everything else (so no call changes anything).
func pathFor(tmpl, self string) string {
	segs := strings.Split(tmpl, "/")
	for i, s := range segs {
		switch {
		case s == "{userId}":
			segs[i] = self
		case strings.HasPrefix(s, "{"):
			segs[i] = "does-not-exist"
		}
	}
	return strings.Join(segs, "/")
}

func bodyFor(method string) string {
	if method == http.MethodPost || method == http.MethodPut {
		return "{}"
	}
	return ""
}

// TestRoleTableIsTheReferences pins package auth's table to the
// reference's roles, written out by hand: which modules each role may
// change and read.
func TestRoleTableIsTheReferences(t *testing.T) {
	all := auth.Modules
	except := func(drop ...auth.Module) []auth.Module {
		out := []auth.Module{}
		for _, m := range all {
			keep := true
			for _, d := range drop {
				keep = keep && m != d
			}
			if keep {
				out = append(out, m)
			}
		}
		return out
	}
	network := []auth.Module{auth.Networks, auth.Groups, auth.DNS, auth.Nameservers, auth.Policies, auth.Routes, auth.Pats}
	want := map[account.Role]struct{ read, write []auth.Module }{
		account.RoleOwner:        {read: all, write: all},
		account.RoleAdmin:        {read: all, write: except(auth.Accounts)},
		account.RoleAuditor:      {read: all, write: nil},
		account.RoleNetworkAdmin: {read: append(network, auth.Settings, auth.Accounts, auth.Events, auth.Users, auth.SetupKeys, auth.Peers, auth.IdentityProviders), write: network},
		// No module, as the reference's table; its handlers still show
		// a user the peers it added and itself (Own read): no groups,
		// no tokens, no changes to its peers.
		account.RoleUser:         {read: []auth.Module{auth.Peers, auth.Users}, write: nil},
		account.RoleBillingAdmin: {read: []auth.Module{auth.Peers, auth.Users}, write: nil},
	}
	in := func(m auth.Module, l []auth.Module) bool {
		for _, x := range l {
			if x == m {
				return true
			}
		}
		return false
	}
	for role, w := range want {
		for _, m := range all {
			if got := auth.RoleCan(role, m, auth.Read) != auth.None; got != in(m, w.read) {
				t.Errorf("%s read %s: %v, want %v", role, m, got, !got)
			}
			if got := auth.RoleCan(role, m, auth.Update) != auth.None; got != in(m, w.write) {
				t.Errorf("%s update %s: %v, want %v", role, m, got, !got)
			}
		}
	}
	if auth.RoleCan("superuser", auth.Peers, auth.Read) != auth.None {
		t.Error("an unknown role reads peers")
	}
}

// TestCurrentUserPermissions: GET /api/users/current reports, for every
// role, every module with the four operations, true exactly where the
// role may act and some route serves it; pages this server cannot serve
// are false even for the owner; is_restricted follows
// regular_users_view_blocked for users.
func TestCurrentUserPermissions(t *testing.T) { engines.Each(t, testCurrentUserPermissions) }

func testCurrentUserPermissions(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	served := map[string]map[string]bool{}
	for _, rt := range httpapi.New(httpapi.Options{}).Routes() {
		m, op, self, _, _ := httpapi.PermOf(rt)
		if rt.Public || self {
			continue
		}
		if served[m] == nil {
			served[m] = map[string]bool{}
		}
		served[m][op] = true
	}
	current := func(c caller) (restricted bool, mods map[string]map[string]bool) {
		t.Helper()
		status, body := r.do("GET", "/api/users/current", c.token, "")
		if status != 200 {
			t.Fatalf("current as %s: %d %s", c.id, status, body)
		}
		var u struct {
			Role        string
			Permissions struct {
				IsRestricted bool                       `json:"is_restricted"`
				Modules      map[string]map[string]bool `json:"modules"`
			}
		}
		if err := json.Unmarshal(body, &u); err != nil {
			t.Fatal(err)
		}
		if u.Role != string(c.user.Role) {
			t.Fatalf("current as %s: role %q", c.id, u.Role)
		}
		return u.Permissions.IsRestricted, u.Permissions.Modules
	}
	var owner account.User
	_ = r.st.Read(context.Background(), func(tx *store.Tx) error {
		owner, _ = tx.UserByID(context.Background(), account.UserID(r.ownerID))
		return nil
	})
	callers := []caller{{id: r.ownerID, token: r.owner.auth, user: owner}}
	for _, role := range account.Roles {
		if role != account.RoleOwner {
			callers = append(callers, r.addCaller("as-"+string(role), role, false))
		}
	}
	byRole := map[account.Role]map[string]map[string]bool{}
	for _, c := range callers {
		restricted, mods := current(c)
		if restricted {
			t.Errorf("%s restricted with regular_users_view_blocked off", c.id)
		}
		if len(mods) != len(auth.Modules) {
			t.Errorf("%s: %d modules, want %d", c.id, len(mods), len(auth.Modules))
		}
		for _, m := range auth.Modules {
			for _, op := range auth.Operations {
				got, ok := mods[string(m)][string(op)]
				want := served[string(m)][string(op)] && auth.Can(c.user, m, op) != auth.None
				if !ok || got != want {
					t.Errorf("%s: %s.%s = %v (present %v), want %v", c.id, m, op, got, ok, want)
				}
			}
		}
		byRole[c.user.Role] = mods
	}
	// Written out: what the dashboard relies on.
	for _, m := range []string{"services", "agent_network"} {
		for op, v := range byRole[account.RoleOwner][m] {
			if v {
				t.Errorf("owner: %s.%s reported available; this server has no such pages", m, op)
			}
		}
	}
	// Remote jobs (debug bundles) are listed, read and created; never
	// updated or deleted.
	if j := byRole[account.RoleOwner]["remote_jobs"]; !j["read"] || !j["create"] || j["update"] || j["delete"] {
		t.Errorf("owner: remote_jobs = %v, want read and create only", j)
	}
	checks := []struct {
		role   account.Role
		module string
		op     string
		want   bool
	}{
		{account.RoleOwner, "users", "delete", true},
		{account.RoleAdmin, "accounts", "delete", false},
		{account.RoleAuditor, "peers", "read", true},
		{account.RoleAuditor, "peers", "delete", false},
		{account.RoleAuditor, "events", "read", true},
		{account.RoleNetworkAdmin, "groups", "create", true},
		{account.RoleOwner, "routes", "create", true},
		{account.RoleOwner, "networks", "delete", true},
		{account.RoleNetworkAdmin, "routes", "update", true},
		{account.RoleNetworkAdmin, "networks", "create", true},
		{account.RoleAuditor, "networks", "read", true},
		{account.RoleAuditor, "routes", "create", false},
		{account.RoleNetworkAdmin, "policies", "update", true},
		{account.RoleNetworkAdmin, "users", "update", false},
		{account.RoleNetworkAdmin, "setup_keys", "create", false},
		{account.RoleUser, "peers", "read", true},
		{account.RoleUser, "peers", "update", false},
		{account.RoleUser, "peers", "delete", false},
		{account.RoleUser, "pats", "create", false},
		{account.RoleUser, "pats", "read", false},
		{account.RoleUser, "groups", "read", false},
		{account.RoleUser, "events", "read", false},
		{account.RoleUser, "settings", "read", false},
		{account.RoleBillingAdmin, "users", "create", false},
	}
	for _, c := range checks {
		if got := byRole[c.role][c.module][c.op]; got != c.want {
			t.Errorf("%s: %s.%s = %v, want %v", c.role, c.module, c.op, got, c.want)
		}
	}

	// regular_users_view_blocked: users (and billing admins) are reported
	// restricted (what they may then reach is the view gate's,
	// viewblock.go).
	acc := obj(list(r.owner.call("GET", "/api/accounts", nil, 200))[0])
	settings := obj(acc["settings"])
	settings["regular_users_view_blocked"] = true
	r.owner.call("PUT", "/api/accounts/"+acc["id"].(string), map[string]any{"settings": settings}, 200)
	for _, c := range callers {
		restricted, _ := current(c)
		if want := c.user.Role == account.RoleUser || c.user.Role == account.RoleBillingAdmin; restricted != want {
			t.Errorf("%s: is_restricted %v with regular_users_view_blocked on, want %v", c.id, restricted, want)
		}
	}
}

// TestAssignRoles: every role but owner can be given through the API;
// unknown roles are refused with 422 naming the known ones.
func TestAssignRoles(t *testing.T) { engines.Each(t, testAssignRoles) }

func testAssignRoles(t *testing.T, eng storetest.Engine) {
	r := newRig(t, eng)
	for _, role := range account.Roles {
		want := 200
		if role == account.RoleOwner {
			want = 422
		}
		u := obj(r.owner.call("POST", "/api/users", map[string]any{"name": "svc-" + string(role), "role": string(role), "auto_groups": []string{}, "is_service_user": true}, want))
		if want == 200 && u["role"] != string(role) {
			t.Errorf("created %s: %v", role, u)
		}
	}
	target := r.addCaller("target", account.RoleUser, false)
	for _, role := range []account.Role{account.RoleAuditor, account.RoleNetworkAdmin, account.RoleBillingAdmin, account.RoleUser} {
		if u := obj(r.owner.call("PUT", "/api/users/target", map[string]any{"role": string(role), "auto_groups": []string{}, "is_blocked": false}, 200)); u["role"] != string(role) {
			t.Errorf("updated to %s: %v", role, u)
		}
	}
	msg := obj(r.owner.call("PUT", "/api/users/target", map[string]any{"role": "superuser", "auto_groups": []string{}, "is_blocked": false}, 422))["message"].(string)
	if !strings.Contains(msg, "network_admin") {
		t.Errorf("unknown role refused with %q", msg)
	}
	// The new role takes effect on the next request.
	r.owner.call("PUT", "/api/users/target", map[string]any{"role": "auditor", "auto_groups": []string{}, "is_blocked": false}, 200)
	r.client(target.token).call("GET", "/api/events/audit", nil, 200)
	r.client(target.token).call("POST", "/api/groups", map[string]any{"name": "x"}, 403)
}
