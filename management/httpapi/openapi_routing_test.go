package httpapi_test

import (
	"context"
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/updates"
)

// conformRouting drives /api/routes and /api/networks: every operation
// answered 2xx with a document-conforming body, and a bad request 422.
func conformRouting(t *testing.T, d *docRig) {
	t.Helper()
	sk := d.call("POST", "/api/setup-keys", "/api/setup-keys", map[string]any{"name": "routers", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}}, 200)
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	p, _, err := peers.New(d.st, updates.NewHub(), nil, nil).Login(context.Background(), peers.LoginInput{Key: priv.Public(), SetupKey: str(sk, "key"),
		Meta: account.Meta{Hostname: "gw-1", OS: "linux", NetbirdVersion: "0.77.1"}})
	if err != nil {
		t.Fatal(err)
	}
	peer := string(p.ID)
	grp := str(d.call("POST", "/api/groups", "/api/groups", map[string]any{"name": "gateways", "peers": []string{peer}}, 200), "id")

	route := map[string]any{"description": "office", "network_id": "office", "enabled": true, "peer": peer, "network": "10.10.0.0/16",
		"metric": 9999, "masquerade": true, "groups": []string{grp}, "keep_route": false}
	rt := str(d.call("POST", "/api/routes", "/api/routes", route, 200), "id")
	d.call("POST", "/api/routes", "/api/routes", map[string]any{"description": "", "network_id": "apps", "enabled": true, "peer_groups": []string{grp},
		"domains": []string{"example.com", "*.corp.example"}, "metric": 100, "masquerade": true, "groups": []string{grp}, "keep_route": true,
		"access_control_groups": []string{grp}}, 200)
	d.call("POST", "/api/routes", "/api/routes", map[string]any{"description": "", "network_id": "exit", "enabled": true, "peer": peer, "network": "0.0.0.0/0",
		"metric": 9999, "masquerade": true, "groups": []string{grp}, "keep_route": false, "skip_auto_apply": true}, 200)
	d.call("POST", "/api/routes", "/api/routes", map[string]any{"description": "", "network_id": "bad", "enabled": true, "peer": peer, "network": "10.20.0.1/16",
		"metric": 9999, "masquerade": true, "groups": []string{grp}, "keep_route": false}, 422)
	d.call("GET", "/api/routes", "/api/routes", nil, 200)
	d.call("GET", "/api/routes/{routeId}", "/api/routes/"+rt, nil, 200)
	route["metric"] = 10
	d.call("PUT", "/api/routes/{routeId}", "/api/routes/"+rt, route, 200)
	d.call("DELETE", "/api/routes/{routeId}", "/api/routes/"+rt, nil, 200)
	d.call("GET", "/api/routes/{routeId}", "/api/routes/"+rt, nil, 404)

	nw := str(d.call("POST", "/api/networks", "/api/networks", map[string]any{"name": "prod", "description": "VPC"}, 200), "id")
	d.call("POST", "/api/networks", "/api/networks", map[string]any{"name": ""}, 422)
	d.call("GET", "/api/networks", "/api/networks", nil, 200)
	d.call("PUT", "/api/networks/{networkId}", "/api/networks/"+nw, map[string]any{"name": "production"}, 200)
	res := str(d.call("POST", "/api/networks/{networkId}/resources", "/api/networks/"+nw+"/resources",
		map[string]any{"name": "db", "address": "10.30.0.5", "enabled": true, "groups": []string{grp}}, 200), "id")
	d.call("POST", "/api/networks/{networkId}/resources", "/api/networks/"+nw+"/resources",
		map[string]any{"name": "web", "address": "*.apps.example", "enabled": true, "groups": []string{}}, 200)
	d.call("POST", "/api/networks/{networkId}/resources", "/api/networks/"+nw+"/resources",
		map[string]any{"name": "bad", "address": "not an address", "enabled": true, "groups": []string{}}, 422)
	d.call("GET", "/api/networks/{networkId}/resources", "/api/networks/"+nw+"/resources", nil, 200)
	d.call("GET", "/api/networks/{networkId}/resources/{resourceId}", "/api/networks/"+nw+"/resources/"+res, nil, 200)
	d.call("PUT", "/api/networks/{networkId}/resources/{resourceId}", "/api/networks/"+nw+"/resources/"+res,
		map[string]any{"name": "db", "address": "10.30.0.0/24", "enabled": true, "groups": []string{grp}}, 200)
	pol := str(d.call("POST", "/api/policies", "/api/policies", map[string]any{"name": "to db", "enabled": true, "rules": []any{map[string]any{
		"name": "to db", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"5432"},
		"sources": []string{grp}, "destinationResource": map[string]any{"id": res, "type": "subnet"}}}}, 200), "id")
	rtr := str(d.call("POST", "/api/networks/{networkId}/routers", "/api/networks/"+nw+"/routers",
		map[string]any{"peer": peer, "metric": 9999, "masquerade": true, "enabled": true}, 200), "id")
	d.call("POST", "/api/networks/{networkId}/routers", "/api/networks/"+nw+"/routers",
		map[string]any{"peer": peer, "peer_groups": []string{grp}, "metric": 9999, "masquerade": true, "enabled": true}, 422)
	d.call("GET", "/api/networks/{networkId}/routers", "/api/networks/"+nw+"/routers", nil, 200)
	d.call("GET", "/api/networks/routers", "/api/networks/routers", nil, 200)
	d.call("GET", "/api/networks/{networkId}/routers/{routerId}", "/api/networks/"+nw+"/routers/"+rtr, nil, 200)
	d.call("PUT", "/api/networks/{networkId}/routers/{routerId}", "/api/networks/"+nw+"/routers/"+rtr,
		map[string]any{"peer_groups": []string{grp}, "metric": 10, "masquerade": false, "enabled": true}, 200)
	n := obj(d.call("GET", "/api/networks/{networkId}", "/api/networks/"+nw, nil, 200))
	if len(list(n["routers"])) != 1 || len(list(n["resources"])) != 2 || len(list(n["policies"])) != 1 || n["routing_peers_count"] != float64(1) {
		t.Errorf("network: %v, want 1 router, 2 resources, 1 policy, 1 routing peer", n)
	}
	d.call("DELETE", "/api/networks/{networkId}/routers/{routerId}", "/api/networks/"+nw+"/routers/"+rtr, nil, 200)
	d.call("DELETE", "/api/networks/{networkId}/resources/{resourceId}", "/api/networks/"+nw+"/resources/"+res, nil, 412) // the policy names it
	d.call("DELETE", "/api/policies/{policyId}", "/api/policies/"+pol, nil, 200)
	d.call("DELETE", "/api/networks/{networkId}/resources/{resourceId}", "/api/networks/"+nw+"/resources/"+res, nil, 200)
	d.call("DELETE", "/api/networks/{networkId}", "/api/networks/"+nw, nil, 200)
	d.call("GET", "/api/networks/{networkId}", "/api/networks/"+nw, nil, 404)
}
