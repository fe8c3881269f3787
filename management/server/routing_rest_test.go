package server_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// routingState is everything the routing API shows plus the number of
// audit events: a refused request must change none of it.
func routingState(t *testing.T, o api) string {
	t.Helper()
	state := map[string]any{"routes": o.call("GET", "/api/routes", nil, 200), "networks": o.call("GET", "/api/networks", nil, 200),
		"routers": o.call("GET", "/api/networks/routers", nil, 200), "events": len(list(o.call("GET", "/api/events/audit", nil, 200)))}
	for _, n := range list(state["networks"]) {
		id := obj(n)["id"].(string)
		state["resources "+id] = o.call("GET", "/api/networks/"+id+"/resources", nil, 200)
	}
	b, _ := json.Marshal(state)
	return string(b)
}

// refused sends a request that must fail with want and a message
// containing msg, and checks that nothing changed.
func refused(t *testing.T, o api, method, path string, body any, want int, msg string) {
	t.Helper()
	before := routingState(t, o)
	got := obj(o.call(method, path, body, want))
	if m, _ := got["message"].(string); !strings.Contains(m, msg) {
		t.Errorf("%s %s: message %q, want it to contain %q", method, path, m, msg)
	}
	if after := routingState(t, o); after != before {
		t.Errorf("%s %s answered %d but changed the state:\nbefore %s\nafter  %s", method, path, want, before, after)
	}
}

// routingPeers registers n peers with a setup key and returns their IDs
// by name.
func routingPeers(t *testing.T, e *env, o api, names ...string) map[string]string {
	t.Helper()
	k := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}}, 200))
	for _, n := range names {
		if _, err := testpeer.New(e.conn, n).Login(context.Background(), k["key"].(string)); err != nil {
			t.Fatal(err)
		}
	}
	ids := map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)] = obj(p)["id"].(string)
	}
	return ids
}

func withField(m map[string]any, kv ...any) map[string]any {
	out := map[string]any{}
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

// TestRoutesREST: the five /api/routes operations with NetBird's shapes,
// every validation rule answering 422 (duplicates 409) with a message
// naming the field and nothing stored, groups a route names not
// deletable, and a deleted routing peer leaving its routes disabled.
func TestRoutesREST(t *testing.T) { engines.Each(t, testRoutesREST) }

func testRoutesREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ids := routingPeers(t, e, o, "gw1", "gw2", "laptop")
	gws := obj(o.call("POST", "/api/groups", map[string]any{"name": "gateways", "peers": []string{ids["gw1"], ids["gw2"]}}, 200))["id"].(string)
	users := obj(o.call("POST", "/api/groups", map[string]any{"name": "users", "peers": []string{ids["laptop"]}}, 200))["id"].(string)
	empty := obj(o.call("POST", "/api/groups", map[string]any{"name": "empty", "peers": []string{}}, 200))["id"].(string)

	// A /24 inside the account's overlay network, around a peer's address.
	var inOverlay string
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		inOverlay = netip.PrefixFrom(netip.MustParseAddr(obj(p)["ip"].(string)), 24).Masked().String()
	}
	base := map[string]any{"description": "office LAN", "network_id": "office", "enabled": true, "peer": ids["gw1"], "network": "10.10.0.0/16",
		"metric": 100, "masquerade": true, "groups": []string{users}, "keep_route": false}
	r1 := obj(o.call("POST", "/api/routes", base, 200))
	want := map[string]any{"id": r1["id"], "description": "office LAN", "network_id": "office", "enabled": true, "peer": ids["gw1"], "network": "10.10.0.0/16",
		"network_type": "IPv4", "domains": []any{}, "metric": float64(100), "masquerade": true, "groups": []any{users}, "keep_route": false, "skip_auto_apply": false}
	if got, _ := json.Marshal(r1); string(got) != jsonText(want) {
		t.Errorf("created route\n got %s\nwant %s", got, jsonText(want))
	}
	// The same network through the other gateway: one HA route.
	o.call("POST", "/api/routes", withField(base, "peer", ids["gw2"], "metric", 200), 200)
	// A domain route through a group, unicode names in punycode.
	dom := obj(o.call("POST", "/api/routes", withField(base, "network_id", "apps", "peer", nil, "peer_groups", []string{gws}, "network", nil,
		"domains", []string{"Bücher.example", "*.corp.example"}, "keep_route", true, "access_control_groups", []string{users}), 200))
	if dom["network_type"] != "Domain" || dom["network"] != "192.0.2.0/32" || jsonText(dom["domains"]) != `["xn--bcher-kva.example","*.corp.example"]` ||
		jsonText(dom["peer_groups"]) != `["`+gws+`"]` || dom["peer"] != "" || jsonText(dom["access_control_groups"]) != `["`+users+`"]` {
		t.Errorf("domain route %v", dom)
	}
	// An exit node, skipping auto-apply; and IPv6.
	exit := obj(o.call("POST", "/api/routes", withField(base, "network_id", "exit", "network", "0.0.0.0/0", "skip_auto_apply", true), 200))
	if exit["skip_auto_apply"] != true {
		t.Errorf("exit node %v", exit)
	}
	if v6 := obj(o.call("POST", "/api/routes", withField(base, "network_id", "v6", "network", "fd00:1234::/64"), 200)); v6["network_type"] != "IPv6" {
		t.Errorf("v6 route %v", v6)
	}

	for _, c := range []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{withField(base, "network_id", ""), 422, "network_id"},
		{withField(base, "network_id", strings.Repeat("n", 41)), 422, "network_id"},
		{withField(base, "metric", 0), 422, "metric"},
		{withField(base, "metric", 10000), 422, "metric"},
		{withField(base, "peer_groups", []string{gws}), 422, "peer and peer_groups"},
		{withField(base, "peer", nil), 422, "peer or peer_groups"},
		{withField(base, "domains", []string{"example.com"}), 422, "network and domains"},
		{withField(base, "network", nil), 422, "network or domains"},
		{withField(base, "network", "10.10.0.1/16"), 422, "did you mean 10.10.0.0/16"},
		{withField(base, "network", "10.10.0.0"), 422, "network"},
		{withField(base, "network", "100.64.0.0/10"), 422, "peer network"},
		{withField(base, "network", inOverlay), 422, "peer network"},
		{withField(base, "network", nil, "domains", []string{"bad_domain!.com"}), 422, "domains"},
		{withField(base, "network", nil, "domains", make([]string, 33)), 422, "at most 32"},
		{withField(base, "peer", "no-such-peer"), 422, "peer"},
		{withField(base, "peer", nil, "peer_groups", []string{"no-such-group"}), 422, "peer_groups"},
		{withField(base, "peer", nil, "peer_groups", []string{empty}), 422, "no peers"},
		{withField(base, "groups", []string{}), 422, "groups"},
		{withField(base, "groups", []string{"no-such-group"}), 422, "groups"},
		{withField(base, "access_control_groups", []string{"no-such-group"}), 422, "access_control_groups"},
		{withField(base, "skip_auto_apply", true), 422, "skip_auto_apply"},
		// gw1 already routes 10.10.0.0/16 (whatever the network_id); so
		// does the gateways group through it.
		{withField(base, "network_id", "other"), 409, "already has this route"},
		{withField(base, "peer", nil, "peer_groups", []string{gws}), 409, "already has this route"},
	} {
		refused(t, o, "POST", "/api/routes", c.body, c.status, c.msg)
	}
	refused(t, o, "POST", "/api/routes", "{not json", 400, "couldn't parse")

	// GET, PUT (a full replace), the replaced route keeps its ID.
	id := r1["id"].(string)
	if got := obj(o.call("GET", "/api/routes/"+id, nil, 200)); got["network"] != "10.10.0.0/16" {
		t.Errorf("GET route %v", got)
	}
	put := obj(o.call("PUT", "/api/routes/"+id, withField(base, "metric", 50, "enabled", false, "description", ""), 200))
	if put["id"] != id || put["metric"] != float64(50) || put["enabled"] != false {
		t.Errorf("PUT route %v", put)
	}
	refused(t, o, "PUT", "/api/routes/"+id, withField(base, "metric", -1), 422, "metric")
	refused(t, o, "PUT", "/api/routes/no-such-route", base, 404, "not found")
	if n := len(list(o.call("GET", "/api/routes", nil, 200))); n != 5 {
		t.Errorf("%d routes, want 5", n)
	}
	o.call("GET", "/api/routes/no-such-route", nil, 404)

	// Groups named by a route cannot be deleted (NetBird's message).
	refused(t, o, "DELETE", "/api/groups/"+users, nil, 412, "group has been linked to route: apps") // routes by network_id
	refused(t, o, "DELETE", "/api/groups/"+gws, nil, 412, "group has been linked to route: apps")

	// Deleting gw1, the single routing peer of three routes: as NetBird's
	// account model does, they stay, disabled and without a peer.
	o.call("DELETE", "/api/peers/"+ids["gw1"], nil, 200)
	for _, r := range list(o.call("GET", "/api/routes", nil, 200)) {
		r := obj(r)
		if r["peer"] == ids["gw1"] {
			t.Errorf("route %v still routes through the deleted peer", r)
		}
		switch r["network_id"] {
		case "office", "exit", "v6":
			if r["peer"] == ids["gw2"] {
				continue // the HA twin through gw2 is untouched
			}
			if r["enabled"] != false || r["peer"] != "" {
				t.Errorf("route %v of the deleted peer: want disabled, no peer", r)
			}
		}
	}
	codes := map[string]bool{}
	for _, ev := range list(o.call("GET", "/api/events/audit", nil, 200)) {
		codes[obj(ev)["activity_code"].(string)] = true
	}
	o.call("DELETE", "/api/routes/"+id, nil, 200)
	o.call("DELETE", "/api/routes/"+id, nil, 404)
	for _, ev := range list(o.call("GET", "/api/events/audit", nil, 200)) {
		codes[obj(ev)["activity_code"].(string)] = true
	}
	for _, c := range []string{"route.add", "route.update", "route.delete"} {
		if !codes[c] {
			t.Errorf("no %s event among %v", c, codes)
		}
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
