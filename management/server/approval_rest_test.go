package server_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/internal/testoidc"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/users"
)

// TestUserApproval: with settings.extra.user_approval_required on, a user
// who joins by e-mail domain is stored pending and refused everything
// (REST with a clear 403, the agent's SSO login) until an admin approves
// it; a rejected user is deleted and waits again on its next login.
func TestUserApproval(t *testing.T) { engines.Each(t, testUserApproval) }

func testUserApproval(t *testing.T, eng storetest.Engine) {
	idp := testoidc.Start(t, "")
	e := startOn(t, eng, server.Options{Identity: server.Identity{Issuer: idp.URL, ClientID: testoidc.ClientID, Mode: users.DomainAccounts,
		AccountDomains: []string{"a.example"}}})
	ctx := context.Background()
	mint := func(sub, email string) string {
		return idp.Mint(t, map[string]any{"sub": sub, "email": email, "email_verified": true, "name": sub})
	}
	owner := e.api("Bearer " + mint("a|1", "alice@a.example"))
	acc := obj(list(owner.call("GET", "/api/accounts", nil, 200))[0])
	settings := obj(acc["settings"])
	// Off (the default): a colleague joins as an active user.
	if me := obj(e.api("Bearer "+mint("a|2", "carol@a.example")).call("GET", "/api/users/current", nil, 200)); me["pending_approval"] != false {
		t.Fatalf("joined with approval off: %v", me)
	}
	settings["extra"] = map[string]any{"peer_approval_enabled": false, "user_approval_required": true, "network_traffic_logs_enabled": false,
		"network_traffic_logs_groups": []string{}, "network_traffic_packet_counter_enabled": false}
	owner.call("PUT", "/api/accounts/"+acc["id"].(string), map[string]any{"settings": settings}, 200)

	daveJWT := mint("a|3", "dave@a.example")
	dave := e.api("Bearer " + daveJWT)
	for _, c := range []struct{ method, path string }{{"GET", "/api/users/current"}, {"GET", "/api/peers"}, {"GET", "/api/users"}} {
		msg := obj(dave.call(c.method, c.path, nil, 403))["message"].(string)
		if !strings.Contains(msg, "pending approval") {
			t.Fatalf("%s %s as a pending user: %q", c.method, c.path, msg)
		}
	}
	p := testpeer.New(e.conn, "dave-laptop")
	if _, err := p.LoginJWT(ctx, daveJWT); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "pending approval") {
		t.Fatalf("pending user's agent login: %v", err)
	}
	var listed map[string]any
	for _, u := range list(owner.call("GET", "/api/users", nil, 200)) {
		if obj(u)["id"] == "a|3" {
			listed = obj(u)
		}
	}
	if listed == nil || listed["pending_approval"] != true || listed["is_blocked"] != true || listed["status"] != "blocked" {
		t.Fatalf("pending user as listed: %v", listed)
	}
	// A regular user may not approve; approving a user not pending is 422.
	e.api("Bearer "+mint("a|2", "carol@a.example")).call("POST", "/api/users/"+url.PathEscape("a|3")+"/approve", nil, 403)
	owner.call("POST", "/api/users/"+url.PathEscape("a|2")+"/approve", nil, 422)
	owner.call("POST", "/api/users/nobody/approve", nil, 404)

	if u := obj(owner.call("POST", "/api/users/"+url.PathEscape("a|3")+"/approve", nil, 200)); u["pending_approval"] != false || u["is_blocked"] != false {
		t.Fatalf("approved user %v", u)
	}
	dave.call("GET", "/api/users/current", nil, 200)
	if _, err := p.LoginJWT(ctx, daveJWT); err != nil {
		t.Fatalf("approved user's agent login: %v", err)
	}
	owner.call("DELETE", "/api/users/"+url.PathEscape("a|3")+"/reject", nil, 422)

	// Rejected: deleted; the old token stays void, a new login waits again.
	erin := e.api("Bearer " + mint("a|4", "erin@a.example"))
	erin.call("GET", "/api/users/current", nil, 403)
	owner.call("DELETE", "/api/users/"+url.PathEscape("a|4")+"/reject", nil, 200)
	for _, u := range list(owner.call("GET", "/api/users", nil, 200)) {
		if obj(u)["id"] == "a|4" {
			t.Fatal("rejected user still listed")
		}
	}
	erin.call("GET", "/api/users/current", nil, 401)
	time.Sleep(1100 * time.Millisecond) // token times are whole seconds
	e.api("Bearer "+mint("a|4", "erin@a.example")).call("GET", "/api/users/current", nil, 403)

	codes := map[string]int{}
	for _, ev := range list(owner.call("GET", "/api/events/audit", nil, 200)) {
		ev := obj(ev)
		codes[ev["activity_code"].(string)]++
		if ev["activity_code"] == "user.join" && ev["target_id"] == "a|3" && obj(ev["meta"])["pending_approval"] != "true" {
			t.Errorf("join event of the pending user: %v", ev)
		}
	}
	if codes["user.approve"] != 1 || codes["user.reject"] != 1 {
		t.Fatalf("audit events %v, want one user.approve and one user.reject", codes)
	}
}
