package server_test

import (
	"testing"

	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestNetworksREST: the sixteen /api/networks operations with NetBird's
// shapes and computed fields, /api/networks/routers served before
// /api/networks/{networkId}, bad input 422 with nothing stored, resources
// reported in their groups and reachable from policies, and what may not
// be deleted while something names it.
func TestNetworksREST(t *testing.T) { engines.Each(t, testNetworksREST) }

func testNetworksREST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ids := routingPeers(t, e, o, "gw1", "gw2", "laptop")
	gws := obj(o.call("POST", "/api/groups", map[string]any{"name": "gateways", "peers": []string{ids["gw1"], ids["gw2"]}}, 200))["id"].(string)
	dbs := obj(o.call("POST", "/api/groups", map[string]any{"name": "databases", "peers": []string{}}, 200))["id"].(string)
	users := obj(o.call("POST", "/api/groups", map[string]any{"name": "users", "peers": []string{ids["laptop"]}}, 200))["id"].(string)

	// Networks.
	refused(t, o, "POST", "/api/networks", map[string]any{"name": " "}, 422, "name")
	nw := obj(o.call("POST", "/api/networks", map[string]any{"name": "prod", "description": "the VPC"}, 200))
	id := nw["id"].(string)
	if jsonText(nw) != jsonText(map[string]any{"id": id, "name": "prod", "description": "the VPC", "routers": []any{}, "resources": []any{}, "policies": []any{}, "routing_peers_count": 0}) {
		t.Errorf("created network %s", jsonText(nw))
	}
	other := obj(o.call("POST", "/api/networks", map[string]any{"name": "stage"}, 200))["id"].(string)
	if n := obj(o.call("PUT", "/api/networks/"+id, map[string]any{"name": "production"}, 200)); n["name"] != "production" || n["description"] != "" {
		t.Errorf("PUT network %v", n)
	}
	refused(t, o, "PUT", "/api/networks/no-such-network", map[string]any{"name": "x"}, 404, "not found")
	if n := len(list(o.call("GET", "/api/networks", nil, 200))); n != 2 {
		t.Errorf("%d networks, want 2", n)
	}

	// Resources: the type follows the address.
	res := "/api/networks/" + id + "/resources"
	host := obj(o.call("POST", res, map[string]any{"name": "db", "description": "postgres", "address": "10.30.0.5", "enabled": true, "groups": []string{dbs}}, 200))
	if host["type"] != "host" || host["address"] != "10.30.0.5/32" || len(list(host["groups"])) != 1 || obj(list(host["groups"])[0])["name"] != "databases" {
		t.Errorf("host resource %v", host)
	}
	subnet := obj(o.call("POST", res, map[string]any{"name": "lan", "address": "192.168.178.0/24", "enabled": true, "groups": []string{dbs}}, 200))
	if subnet["type"] != "subnet" {
		t.Errorf("subnet resource %v", subnet)
	}
	domain := obj(o.call("POST", res, map[string]any{"name": "apps", "address": "*.Apps.Example", "enabled": false, "groups": []string{}}, 200))
	if domain["type"] != "domain" || domain["address"] != "*.apps.example" || domain["enabled"] != false {
		t.Errorf("domain resource %v", domain)
	}
	for _, c := range []struct {
		body map[string]any
		msg  string
	}{
		{map[string]any{"name": "", "address": "10.0.0.1", "enabled": true, "groups": []string{}}, "name"},
		{map[string]any{"name": "db", "address": "10.0.0.1", "enabled": true, "groups": []string{}}, "already exists"},
		{map[string]any{"name": "x", "address": "", "enabled": true, "groups": []string{}}, "address"},
		{map[string]any{"name": "x", "address": "not an address", "enabled": true, "groups": []string{}}, "address"},
		{map[string]any{"name": "x", "address": "10.1.2.3/16", "enabled": true, "groups": []string{}}, "did you mean 10.1.0.0/16"},
		{map[string]any{"name": "x", "address": "100.64.0.0/10", "enabled": true, "groups": []string{}}, "peer network"},
		{map[string]any{"name": "x", "address": "10.0.0.1", "enabled": true, "groups": []string{"no-such-group"}}, "groups"},
	} {
		refused(t, o, "POST", res, c.body, 422, c.msg)
	}
	refused(t, o, "POST", "/api/networks/no-such-network/resources", map[string]any{"name": "x", "address": "10.0.0.1", "enabled": true, "groups": []string{}}, 404, "not found")
	hostID := host["id"].(string)
	if got := obj(o.call("GET", res+"/"+hostID, nil, 200)); got["name"] != "db" {
		t.Errorf("GET resource %v", got)
	}
	o.call("GET", "/api/networks/"+other+"/resources/"+hostID, nil, 404) // not that network's
	if put := obj(o.call("PUT", res+"/"+hostID, map[string]any{"name": "db", "address": "10.30.0.0/24", "enabled": true, "groups": []string{dbs}}, 200)); put["type"] != "subnet" || put["id"] != hostID {
		t.Errorf("PUT resource %v", put)
	}
	refused(t, o, "PUT", "/api/networks/"+other+"/resources/"+hostID, map[string]any{"name": "db", "address": "10.30.0.0/24", "enabled": true, "groups": []string{}}, 404, "not found")
	if n := len(list(o.call("GET", res, nil, 200))); n != 3 {
		t.Errorf("%d resources, want 3", n)
	}
	// Groups report the resources placed in them.
	g := obj(o.call("GET", "/api/groups/"+dbs, nil, 200))
	if g["resources_count"] != float64(2) || len(list(g["resources"])) != 2 || obj(list(g["resources"])[0])["type"] == "" {
		t.Errorf("group with resources %v", g)
	}

	// A group PUT with resources places exactly those in it; without the
	// field it leaves them alone.
	web := obj(o.call("POST", "/api/groups", map[string]any{"name": "web", "peers": []string{},
		"resources": []any{map[string]any{"id": domain["id"], "type": "domain"}, map[string]any{"id": hostID, "type": "host"}}}, 200))
	if web["resources_count"] != float64(2) {
		t.Errorf("group created with resources %v", web)
	}
	webID := web["id"].(string)
	o.call("PUT", "/api/groups/"+webID, map[string]any{"name": "web", "peers": []string{}, "resources": []any{map[string]any{"id": domain["id"], "type": "domain"}}}, 200)
	o.call("PUT", "/api/groups/"+webID, map[string]any{"name": "web", "peers": []string{}}, 200)
	if got := obj(o.call("GET", res+"/"+domain["id"].(string), nil, 200)); len(list(got["groups"])) != 1 || obj(list(got["groups"])[0])["id"] != webID {
		t.Errorf("domain resource after the group PUTs: %v, want only in web", got)
	}
	if got := obj(o.call("GET", res+"/"+hostID, nil, 200)); len(list(got["groups"])) != 1 {
		t.Errorf("host resource after the group PUTs: %v, want only in databases", got)
	}
	refused(t, o, "PUT", "/api/groups/"+webID, map[string]any{"name": "web", "resources": []any{map[string]any{"id": "no-such-resource", "type": "host"}}}, 422, "resources")
	o.call("PUT", "/api/groups/"+webID, map[string]any{"name": "web", "resources": []any{}}, 200)
	o.call("DELETE", "/api/groups/"+webID, nil, 200)

	// Routers.
	rts := "/api/networks/" + id + "/routers"
	r1 := obj(o.call("POST", rts, map[string]any{"peer": ids["gw1"], "metric": 100, "masquerade": true, "enabled": true}, 200))
	if jsonText(r1) != jsonText(map[string]any{"id": r1["id"], "peer": ids["gw1"], "peer_groups": []any{}, "metric": 100, "masquerade": true, "enabled": true}) {
		t.Errorf("created router %s", jsonText(r1))
	}
	r2 := obj(o.call("POST", rts, map[string]any{"peer_groups": []string{gws}, "metric": 200, "masquerade": false, "enabled": true}, 200))
	for _, c := range []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{map[string]any{"peer": ids["gw2"], "peer_groups": []string{gws}, "metric": 1, "enabled": true}, 422, "peer and peer_groups"},
		{map[string]any{"metric": 1, "enabled": true}, 422, "peer or peer_groups"},
		{map[string]any{"peer": ids["gw2"], "metric": 0, "enabled": true}, 422, "metric"},
		{map[string]any{"peer": "no-such-peer", "metric": 1, "enabled": true}, 422, "peer"},
		{map[string]any{"peer_groups": []string{dbs}, "metric": 1, "enabled": true}, 422, "no peers"},
		{map[string]any{"peer_groups": []string{"no-such-group"}, "metric": 1, "enabled": true}, 422, "peer_groups"},
		{map[string]any{"peer": ids["gw1"], "metric": 1, "enabled": true}, 409, "already a router"},
	} {
		refused(t, o, "POST", rts, c.body, c.status, c.msg)
	}
	o.call("POST", "/api/networks/"+other+"/routers", map[string]any{"peer": ids["gw1"], "metric": 1, "enabled": true}, 200) // another network: fine
	if got := obj(o.call("GET", rts+"/"+r1["id"].(string), nil, 200)); got["peer"] != ids["gw1"] {
		t.Errorf("GET router %v", got)
	}
	if put := obj(o.call("PUT", rts+"/"+r1["id"].(string), map[string]any{"peer": ids["gw1"], "metric": 5, "masquerade": false, "enabled": false}, 200)); put["metric"] != float64(5) || put["enabled"] != false {
		t.Errorf("PUT router %v", put)
	}
	if n := len(list(o.call("GET", rts, nil, 200))); n != 2 {
		t.Errorf("%d routers of the network, want 2", n)
	}
	// /api/networks/routers lists every network's routers: a literal path,
	// not the network "routers".
	if n := len(list(o.call("GET", "/api/networks/routers", nil, 200))); n != 3 {
		t.Errorf("%d routers in the account, want 3", n)
	}

	// A policy to a resource; the network lists it.
	rule := map[string]any{"name": "to db", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"5432"},
		"sources": []string{users}, "destinationResource": map[string]any{"id": hostID, "type": "subnet"}}
	pol := obj(o.call("POST", "/api/policies", map[string]any{"name": "to db", "enabled": true, "rules": []any{rule}}, 200))
	if r := obj(list(pol["rules"])[0]); jsonText(r["destinationResource"]) != jsonText(map[string]any{"id": hostID, "type": "subnet"}) || r["destinations"] != nil {
		t.Errorf("policy rule %v", r)
	}
	bad := map[string]any{"name": "bad", "enabled": true, "rules": []any{func() map[string]any {
		m := map[string]any{}
		for k, v := range rule {
			m[k] = v
		}
		m["destinationResource"] = map[string]any{"id": "no-such-resource", "type": "host"}
		return m
	}()}}
	o.call("POST", "/api/policies", bad, 422)
	n := obj(o.call("GET", "/api/networks/"+id, nil, 200))
	if len(list(n["routers"])) != 2 || len(list(n["resources"])) != 3 || jsonText(n["policies"]) != jsonText([]any{pol["id"]}) || n["routing_peers_count"] != float64(2) {
		t.Errorf("network %s: want 2 routers, 3 resources, the policy, 2 routing peers (gw1 twice counts once)", jsonText(n))
	}

	// What may not go while something names it.
	refused(t, o, "DELETE", "/api/groups/"+dbs, nil, 412, "group has been linked to network resource")
	refused(t, o, "DELETE", "/api/groups/"+gws, nil, 412, "group has been linked to network router")
	refused(t, o, "DELETE", res+"/"+hostID, nil, 412, "linked to policy: to db")
	refused(t, o, "DELETE", "/api/networks/"+id, nil, 412, "linked to policy: to db")
	refused(t, o, "DELETE", "/api/peers/"+ids["gw1"], nil, 412, "peer is linked to a network router")

	o.call("DELETE", "/api/policies/"+pol["id"].(string), nil, 200)
	o.call("DELETE", res+"/"+hostID, nil, 200)
	o.call("GET", res+"/"+hostID, nil, 404)
	o.call("DELETE", rts+"/"+r2["id"].(string), nil, 200)
	o.call("DELETE", "/api/networks/"+other+"/routers/"+r1["id"].(string), nil, 404) // not that network's
	// Deleting the network takes its resources and routers along.
	o.call("DELETE", "/api/networks/"+id, nil, 200)
	o.call("GET", "/api/networks/"+id, nil, 404)
	o.call("GET", rts, nil, 404)
	if n := len(list(o.call("GET", "/api/networks/routers", nil, 200))); n != 1 {
		t.Errorf("%d routers left, want stage's 1", n)
	}
	o.call("DELETE", "/api/groups/"+dbs, nil, 200)
	codes := map[string]bool{}
	for _, ev := range list(o.call("GET", "/api/events/audit", nil, 200)) {
		codes[obj(ev)["activity_code"].(string)] = true
	}
	for _, c := range []string{"network.create", "network.update", "network.delete", "network.resource.create", "network.resource.update",
		"network.resource.delete", "network.router.create", "network.router.update", "network.router.delete"} {
		if !codes[c] {
			t.Errorf("no %s event", c)
		}
	}
}
