package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/users"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// tfSettings is AccountSettings as the Terraform provider sends it: every
// field, extra included.
func tfSettings() map[string]any {
	return map[string]any{
		"peer_login_expiration_enabled": true, "peer_login_expiration": 7200,
		"peer_inactivity_expiration_enabled": true, "peer_inactivity_expiration": 600,
		"regular_users_view_blocked": true, "peer_expose_enabled": false, "peer_expose_groups": []string{},
		"groups_propagation_enabled": false, "jwt_groups_enabled": true, "jwt_groups_claim_name": "roles",
		"jwt_allow_groups": []string{"admins"}, "routing_peer_dns_resolution_enabled": true,
		"dns_domain": "mesh.example.org", "network_range": "10.77.0.0/16", "network_range_v6": "", "ipv6_enabled_groups": []string{},
		"extra": map[string]any{"peer_approval_enabled": false, "user_approval_required": true, "network_traffic_logs_enabled": false,
			"network_traffic_logs_groups": []string{}, "network_traffic_packet_counter_enabled": false},
		"lazy_connection_enabled": true, "auto_update_version": "disabled", "auto_update_always": false, "metrics_push_enabled": false,
		"local_mfa_enabled": true,
	}
}

func accountOf(o api) map[string]any {
	return obj(list(o.call("GET", "/api/accounts", nil, 200))[0])
}

// TestAccountSettingsREST: every setting of the spec round-trips through
// GET and PUT; settings this server does not implement are refused with
// 422 naming the field when moved off their default; a refused or invalid
// PUT stores nothing.
func TestAccountSettingsREST(t *testing.T) { engines.Each(t, testAccountSettingsREST) }

func testAccountSettingsREST(t *testing.T, eng storetest.Engine) {
	_, o := ownerAPI(t, eng)
	acc := accountOf(o)
	id := acc["id"].(string)
	s := obj(acc["settings"])
	// Every field is there from the start, extra with its five.
	for _, f := range []string{"peer_login_expiration_enabled", "peer_login_expiration", "peer_inactivity_expiration_enabled", "peer_inactivity_expiration",
		"regular_users_view_blocked", "peer_expose_enabled", "peer_expose_groups", "groups_propagation_enabled", "jwt_groups_enabled",
		"jwt_groups_claim_name", "jwt_allow_groups", "routing_peer_dns_resolution_enabled", "dns_domain", "network_range", "ipv6_enabled_groups",
		"extra", "lazy_connection_enabled", "auto_update_version", "auto_update_always", "metrics_push_enabled", "embedded_idp_enabled",
		"local_auth_disabled", "local_mfa_enabled"} {
		if _, ok := s[f]; !ok {
			t.Errorf("settings lack %s: %v", f, s)
		}
	}
	extra := obj(s["extra"])
	for _, f := range []string{"peer_approval_enabled", "user_approval_required", "network_traffic_logs_enabled", "network_traffic_logs_groups", "network_traffic_packet_counter_enabled"} {
		if _, ok := extra[f]; !ok {
			t.Errorf("extra lacks %s: %v", f, extra)
		}
	}
	if s["groups_propagation_enabled"] != true || s["dns_domain"] != "netbird.selfhosted" || !strings.HasPrefix(s["network_range"].(string), "100.") {
		t.Fatalf("defaults: %v", s)
	}

	// The Terraform provider's request: everything comes back as sent.
	put := tfSettings()
	got := obj(obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": put}, 200))["settings"])
	again := obj(accountOf(o)["settings"])
	for k, want := range put {
		if k == "network_range_v6" {
			continue // sent empty, not echoed
		}
		w, _ := json.Marshal(want)
		for name, s := range map[string]map[string]any{"PUT": got, "GET": again} {
			g, _ := json.Marshal(s[k])
			if string(g) != string(w) {
				t.Errorf("%s %s = %s, want %s", name, k, g, w)
			}
		}
	}

	// Refused: unsupported values and invalid ones, each naming its field.
	before := accountOf(o)
	for field, mutate := range map[string]func(m map[string]any){
		"peer_expose_enabled":                    func(m map[string]any) { m["peer_expose_enabled"] = true },
		"peer_expose_groups":                     func(m map[string]any) { m["peer_expose_groups"] = []string{"g"} },
		"network_range_v6":                       func(m map[string]any) { m["network_range_v6"] = "fe80::/64" },
		"network_range_v6 ":                      func(m map[string]any) { m["network_range_v6"] = "fd00::/40" },
		"network_range_v6  ":                     func(m map[string]any) { m["network_range_v6"] = "10.0.0.0/16" },
		"ipv6_enabled_groups":                    func(m map[string]any) { m["ipv6_enabled_groups"] = []string{"g"} },
		"auto_update_version":                    func(m map[string]any) { m["auto_update_version"] = "latest" },
		"auto_update_always":                     func(m map[string]any) { m["auto_update_always"] = true },
		"metrics_push_enabled":                   func(m map[string]any) { m["metrics_push_enabled"] = true },
		"agent_network_only":                     func(m map[string]any) { m["agent_network_only"] = true },
		"network_traffic_logs_enabled":           func(m map[string]any) { obj(m["extra"])["network_traffic_logs_enabled"] = true },
		"network_traffic_packet_counter_enabled": func(m map[string]any) { obj(m["extra"])["network_traffic_packet_counter_enabled"] = true },
		"dns_domain":                             func(m map[string]any) { m["dns_domain"] = "bad_domain..x" },
		"dns_domain ":                            func(m map[string]any) { m["dns_domain"] = "single" },
		"network_range":                          func(m map[string]any) { m["network_range"] = "8.8.0.0/16" },
		"network_range ":                         func(m map[string]any) { m["network_range"] = "10.0.0.0/30" },
		"network_range  ":                        func(m map[string]any) { m["network_range"] = "fd00::/64" },
		"network_range   ":                       func(m map[string]any) { m["network_range"] = "nonsense" },
		"peer_inactivity_expiration":             func(m map[string]any) { m["peer_inactivity_expiration"] = -1 },
		"peer_inactivity_expiration ":            func(m map[string]any) { m["peer_inactivity_expiration"] = 10 },
		"peer_login_expiration":                  func(m map[string]any) { m["peer_login_expiration"] = 0 },
		"jwt_allow_groups":                       func(m map[string]any) { m["jwt_allow_groups"] = []string{""} },
	} {
		t.Run(strings.TrimSpace(field), func(t *testing.T) {
			m := tfSettings()
			m["dns_domain"], m["network_range"] = "other.example", "10.88.0.0/16"
			mutate(m)
			body := obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": m}, 422))
			if !strings.Contains(body["message"].(string), strings.TrimSpace(field)) {
				t.Fatalf("message %q does not name %s", body["message"], field)
			}
		})
	}
	if after := accountOf(o); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused PUT changed the account:\n%v\n%v", before, after)
	}
	// Another account's ID is not found; a body without settings is 422.
	o.call("PUT", "/api/accounts/nope", map[string]any{"settings": put}, 404)
	o.call("PUT", "/api/accounts/"+id, map[string]any{}, 422)

	// dns_domain "" goes back to the default; omitted keeps the domain.
	put["dns_domain"] = ""
	if d := obj(obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": put}, 200))["settings"])["dns_domain"]; d != "netbird.selfhosted" {
		t.Fatalf("dns_domain after reset: %v", d)
	}
	put["dns_domain"] = "Mesh.Example.org."
	o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": put}, 200)
	delete(put, "dns_domain")
	delete(put, "network_range")
	s = obj(obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": put}, 200))["settings"])
	if s["dns_domain"] != "mesh.example.org" || s["network_range"] != "10.77.0.0/16" {
		t.Fatalf("omitted dns_domain/network_range changed: %v %v", s["dns_domain"], s["network_range"])
	}
	// Omitted extra keeps it (as NetBird); a sent extra replaces it.
	delete(put, "extra")
	if x := obj(obj(obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": put}, 200))["settings"])["extra"]); x["user_approval_required"] != true {
		t.Fatalf("extra after a PUT without it: %v", x)
	}
	put["extra"] = map[string]any{"peer_approval_enabled": true, "user_approval_required": false}
	if x := obj(obj(obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": put}, 200))["settings"])["extra"]); x["user_approval_required"] != false || x["peer_approval_enabled"] != true {
		t.Fatalf("extra after replacing it: %v", x)
	}
}

// TestAccountNetworkREST: a new network range re-addresses every peer
// into it, a new DNS domain renames them, and the lazy connection and
// routing-peer DNS flags reach the clients: the open streams get maps
// carrying all of it. A range too small for the peers is refused.
func TestAccountNetworkREST(t *testing.T) { engines.Each(t, testAccountNetworkREST) }

func testAccountNetworkREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx := context.Background()
	id := accountOf(o)["id"].(string)
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 0, "auto_groups": []string{}, "usage_limit": 0}, 200))
	var ps []*testpeer.Peer
	var streams []*testpeer.Stream
	for i := range 3 {
		p := testpeer.New(e.conn, fmt.Sprintf("box%d", i))
		if _, err := p.Login(ctx, key["key"].(string)); err != nil {
			t.Fatal(err)
		}
		st, err := p.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ps, streams = append(ps, p), append(streams, st)
	}
	set := tfSettings()
	set["jwt_groups_enabled"], set["jwt_allow_groups"], set["regular_users_view_blocked"] = false, []string{}, false
	set["network_range"], set["dns_domain"] = "192.168.40.0/24", "corp.internal"
	o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": set}, 200)

	network := netip.MustParsePrefix("192.168.40.0/24")
	inRange := func(cidr string) bool {
		p, err := netip.ParsePrefix(cidr)
		return err == nil && network.Contains(p.Addr())
	}
	for i, st := range streams {
		err := st.WaitFor(10*time.Second, func([]*mgmtpb.SyncResponse) bool {
			m := st.LatestMap()
			pc := m.GetPeerConfig()
			if !strings.HasSuffix(pc.GetAddress(), "/24") || !inRange(pc.GetAddress()) || !strings.HasSuffix(pc.GetFqdn(), ".corp.internal") ||
				!pc.GetLazyConnectionEnabled() || !pc.GetRoutingPeerDnsResolutionEnabled() || len(m.GetRemotePeers()) != 2 {
				return false
			}
			for _, rp := range m.GetRemotePeers() {
				if len(rp.GetAllowedIps()) == 0 || !inRange(rp.GetAllowedIps()[0]) || !strings.HasSuffix(rp.GetFqdn(), ".corp.internal") {
					return false
				}
			}
			return true
		})
		if err != nil {
			t.Fatalf("peer %d map after the change: %v", i, st.LatestMap())
		}
	}
	seen := map[string]bool{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ip := obj(p)["ip"].(string)
		if !network.Contains(netip.MustParseAddr(ip)) || seen[ip] || !strings.HasSuffix(obj(p)["dns_label"].(string), ".corp.internal") {
			t.Fatalf("peer after re-addressing: %v", p)
		}
		seen[ip] = true
	}
	// A peer registering now gets an address in the new range.
	if r, err := testpeer.New(e.conn, "late").Login(ctx, key["key"].(string)); err != nil || !inRange(r.GetPeerConfig().GetAddress()) {
		t.Fatalf("late peer: %v %v", r.GetPeerConfig(), err)
	}

	// Four peers do not fit a /30-sized range; /28 is the smallest, so
	// fill a /28 first: 14 addresses for 15 peers.
	for i := range 11 {
		if _, err := testpeer.New(e.conn, fmt.Sprintf("fill%d", i)).Login(ctx, key["key"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	before := accountOf(o)
	set["network_range"] = "10.1.2.0/28"
	if msg := obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": set}, 422))["message"].(string); !strings.Contains(msg, "network_range") {
		t.Fatalf("too small: %q", msg)
	}
	if after := accountOf(o); !reflect.DeepEqual(after, before) {
		t.Fatalf("a refused range changed the account")
	}
	set["network_range"] = "10.1.2.0/27"
	o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": set}, 200)
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		if !netip.MustParsePrefix("10.1.2.0/27").Contains(netip.MustParseAddr(obj(p)["ip"].(string))) {
			t.Fatalf("peer outside 10.1.2.0/27: %v", obj(p)["ip"])
		}
	}
	_ = ps
}

// regularUser makes a service user with role user and returns a client
// with its personal access token.
func regularUser(t *testing.T, e *env, o api) (api, string) {
	t.Helper()
	u := obj(o.call("POST", "/api/users", map[string]any{"role": "user", "is_service_user": true, "name": "viewer", "auto_groups": []string{}}, 200))
	tok := obj(o.call("POST", "/api/users/"+u["id"].(string)+"/tokens", map[string]any{"name": "t", "expires_in": 1}, 200))
	return e.api("Token " + tok["plain_token"].(string)), u["id"].(string)
}

// TestRegularUsersViewBlocked: with the setting on, users with role user
// reach only their own user and peers; admins are untouched.
func TestRegularUsersViewBlocked(t *testing.T) { engines.Each(t, testRegularUsersViewBlocked) }

func testRegularUsersViewBlocked(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	id := accountOf(o)["id"].(string)
	u, uid := regularUser(t, e, o)
	for _, path := range []string{"/api/groups", "/api/policies", "/api/peers", "/api/users/current", "/api/users/" + uid} {
		u.call("GET", path, nil, 200)
	}
	set := tfSettings()
	set["jwt_groups_enabled"], set["jwt_allow_groups"] = false, []string{}
	delete(set, "network_range")
	o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": set}, 200)
	for _, path := range []string{"/api/groups", "/api/policies", "/api/posture-checks", "/api/setup-keys", "/api/events/audit", "/api/users", "/api/accounts"} {
		if msg := obj(u.call("GET", path, nil, 403))["message"].(string); !strings.Contains(msg, "regular_users_view_blocked") {
			t.Fatalf("GET %s: %q", path, msg)
		}
	}
	for _, path := range []string{"/api/peers", "/api/users/current", "/api/users/" + uid, "/api/users/" + uid + "/tokens"} {
		u.call("GET", path, nil, 200)
	}
	o.call("GET", "/api/groups", nil, 200)
	set["regular_users_view_blocked"] = false
	o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": set}, 200)
	u.call("GET", "/api/groups", nil, 200)
}

// TestDeleteAccountREST: only the owner deletes the account; everything
// in it goes, its peers' streams end, other accounts stay.
func TestDeleteAccountREST(t *testing.T) { engines.Each(t, testDeleteAccountREST) }

func testDeleteAccountREST(t *testing.T, eng storetest.Engine) {
	// The install's own account, where the built-in provider's setup puts
	// its owner, is refused: deleting it would reopen POST /api/setup.
	_, own := ownerAPI(t, eng)
	own.call("DELETE", "/api/accounts/"+accountOf(own)["id"].(string), nil, 412)
	own.call("GET", "/api/accounts", nil, 200)
	own.call("POST", "/api/setup", map[string]any{"email": "x@example.com", "password": "Other-passw0rd!", "name": "X"}, 412)

	// With an external provider in domain mode every stranger owns an
	// account of its own, which its owner may delete.
	idp := testoidc.Start(t, "")
	e := startOn(t, eng, server.Options{Identity: server.Identity{Issuer: idp.URL, ClientID: testoidc.ClientID, Mode: users.DomainAccounts}})
	ctx := context.Background()
	e.api("Bearer "+idp.Mint(t, map[string]any{"sub": "first", "email": "first@example.com"})).call("GET", "/api/users/current", nil, 200)
	o := e.api("Bearer " + idp.Mint(t, map[string]any{"sub": "owner", "email": "owner@example.com"}))
	me := obj(o.call("GET", "/api/users/current", nil, 200))["id"].(string)
	o = e.api("Token " + obj(o.call("POST", "/api/users/"+me+"/tokens", map[string]any{"name": "t", "expires_in": 1}, 200))["plain_token"].(string))
	id := accountOf(o)["id"].(string)
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 0, "auto_groups": []string{}, "usage_limit": 0}, 200))
	p := testpeer.New(e.conn, "box")
	if _, err := p.Login(ctx, key["key"].(string)); err != nil {
		t.Fatal(err)
	}
	st, err := p.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.WaitFor(5*time.Second, func(m []*mgmtpb.SyncResponse) bool { return len(m) > 0 }); err != nil {
		t.Fatal(err)
	}
	admin := obj(o.call("POST", "/api/users", map[string]any{"role": "admin", "is_service_user": true, "name": "adm", "auto_groups": []string{}}, 200))
	adm := e.api("Token " + obj(o.call("POST", "/api/users/"+admin["id"].(string)+"/tokens", map[string]any{"name": "t", "expires_in": 1}, 200))["plain_token"].(string))
	adm.call("DELETE", "/api/accounts/"+id, nil, 403)
	o.call("DELETE", "/api/accounts/other", nil, 404)

	o.call("DELETE", "/api/accounts/"+id, nil, 200)
	// The stream ends; the key, the tokens and the peer are gone.
	if err := st.WaitFor(10*time.Second, func([]*mgmtpb.SyncResponse) bool { return st.Err() != nil }); err != nil {
		t.Fatalf("stream still open after the account was deleted")
	}
	o.call("GET", "/api/accounts", nil, 401)
	adm.call("GET", "/api/peers", nil, 401)
	if _, err := testpeer.New(e.conn, "again").Login(ctx, key["key"].(string)); err == nil {
		t.Fatal("the deleted account's setup key still registers peers")
	}
	if _, err := p.Login(ctx, ""); err == nil {
		t.Fatal("the deleted account's peer still logs in")
	}
}

// TestJWTAccountSettings: with an external provider, jwt_allow_groups
// refuses users without an allowed group (read from the account's claim
// name), and groups propagation moves a user's peers along with its auto
// groups only while it is on.
func TestJWTAccountSettings(t *testing.T) { engines.Each(t, testJWTAccountSettings) }

func testJWTAccountSettings(t *testing.T, eng storetest.Engine) {
	idp := testoidc.Start(t, "")
	e := startOn(t, eng, server.Options{Identity: server.Identity{Issuer: idp.URL, ClientID: testoidc.ClientID}})
	ctx := context.Background()
	mint := func(sub string, roles ...string) string {
		return idp.Mint(t, map[string]any{"sub": sub, "email": sub + "@example.com", "roles": roles})
	}
	owner := e.api("Bearer " + mint("owner", "admins"))
	me := obj(owner.call("GET", "/api/users/current", nil, 200))["id"].(string)
	owner = e.api("Token " + obj(owner.call("POST", "/api/users/"+me+"/tokens", map[string]any{"name": "t", "expires_in": 1}, 200))["plain_token"].(string))
	id := accountOf(owner)["id"].(string)
	// A second user and its peer (added through SSO).
	e.api("Bearer "+mint("dev", "devs")).call("GET", "/api/users/current", nil, 200)
	p := testpeer.New(e.conn, "dev-box")
	if _, err := p.LoginJWT(ctx, mint("dev", "devs")); err != nil {
		t.Fatal(err)
	}

	set := map[string]any{"peer_login_expiration_enabled": true, "peer_login_expiration": 86400, "jwt_groups_enabled": true,
		"jwt_groups_claim_name": "roles", "jwt_allow_groups": []string{"admins"}, "groups_propagation_enabled": false}
	owner.call("PUT", "/api/accounts/"+id, map[string]any{"settings": set}, 200)
	if msg := obj(e.api("Bearer "+mint("dev", "devs")).call("GET", "/api/users/current", nil, 403))["message"].(string); !strings.Contains(msg, "allowed JWT groups") {
		t.Fatalf("refusal: %q", msg)
	}
	if _, err := testpeer.New(e.conn, "dev-box2").LoginJWT(ctx, mint("dev", "devs")); err == nil {
		t.Fatal("an SSO login without an allowed group registered a peer")
	}
	e.api("Bearer "+mint("dev", "devs", "admins")).call("GET", "/api/users/current", nil, 200)

	// Propagation off: changing the user's auto groups leaves its peer.
	g := obj(owner.call("POST", "/api/groups", map[string]any{"name": "team"}, 200))["id"].(string)
	var dev map[string]any
	for _, u := range list(owner.call("GET", "/api/users", nil, 200)) {
		if obj(u)["id"] == "dev" {
			dev = obj(u)
		}
	}
	peerGroups := func() []string {
		var names []string
		for _, pp := range list(owner.call("GET", "/api/peers", nil, 200)) {
			for _, gg := range list(obj(pp)["groups"]) {
				names = append(names, obj(gg)["name"].(string))
			}
		}
		return names
	}
	groups := append(list(dev["auto_groups"]), g)
	owner.call("PUT", "/api/users/dev", map[string]any{"role": "user", "auto_groups": groups, "is_blocked": false}, 200)
	for _, n := range peerGroups() {
		if n == "team" {
			t.Fatalf("peer joined team with propagation off: %v", peerGroups())
		}
	}
	// Turning it on applies the auto groups to the user's peers; removing
	// the group from the user then takes the peer out.
	set["groups_propagation_enabled"], set["jwt_allow_groups"] = true, []string{}
	owner.call("PUT", "/api/accounts/"+id, map[string]any{"settings": set}, 200)
	has := func() bool {
		for _, n := range peerGroups() {
			if n == "team" {
				return true
			}
		}
		return false
	}
	if !has() {
		t.Fatalf("propagation on: peer groups %v", peerGroups())
	}
	owner.call("PUT", "/api/users/dev", map[string]any{"role": "user", "auto_groups": groups[:len(groups)-1], "is_blocked": false}, 200)
	if has() {
		t.Fatalf("peer still in team after the user lost it: %v", peerGroups())
	}
}
