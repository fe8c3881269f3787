package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestRoutesInMaps: a route made through the REST API reaches, through
// the store and the Sync streams, the client (as NetBird's Route with the
// routing peer's key) and the routing peer (its own route and the
// accept-all route rule), on a delta stream and on a whole-map one; when
// disabled, both lose it.
func TestRoutesInMaps(t *testing.T) { engines.Each(t, testRoutesInMaps) }

func testRoutesInMaps(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	router, client := testpeer.New(e.conn, "router"), testpeer.New(e.conn, "client")
	router.Deltas = true
	streams := map[string]*testpeer.Stream{}
	for name, p := range map[string]*testpeer.Peer{"router": router, "client": client} {
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatal(err)
		}
		s, err := p.Sync(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		streams[name] = s
	}
	ids := map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)] = obj(p)["id"].(string)
	}
	var all string
	for _, g := range list(o.call("GET", "/api/groups", nil, 200)) {
		if obj(g)["name"] == "All" {
			all = obj(g)["id"].(string)
		}
	}
	rt := obj(o.call("POST", "/api/routes", map[string]any{"description": "", "network_id": "lan", "enabled": true, "peer": ids["router"],
		"network": "10.1.0.0/16", "metric": 9999, "masquerade": true, "groups": []string{all}, "keep_route": false}, 200))
	routeID := rt["id"].(string)
	wait := func(name string, ok func(nm *mgmtpb.NetworkMap) bool) *mgmtpb.NetworkMap {
		t.Helper()
		s := streams[name]
		if err := s.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool { return ok(s.LatestMap()) }); err != nil {
			t.Fatalf("%s: %v; last map routes %v, route rules %v", name, err, s.LatestMap().GetRoutes(), s.LatestMap().GetRoutesFirewallRules())
		}
		return s.LatestMap()
	}
	routerKey := router.Public().String()
	hasRoute := func(nm *mgmtpb.NetworkMap) bool {
		rs := nm.GetRoutes()
		return len(rs) == 1 && rs[0].GetID() == routeID && rs[0].GetNetID() == "lan" && rs[0].GetNetwork() == "10.1.0.0/16" &&
			rs[0].GetNetworkType() == 1 && rs[0].GetPeer() == routerKey && rs[0].GetMetric() == 9999 && rs[0].GetMasquerade()
	}
	nm := wait("client", hasRoute)
	if len(nm.GetRoutesFirewallRules()) != 0 || !nm.GetRoutesFirewallRulesIsEmpty() {
		t.Errorf("client: route rules %v (empty flag %t)", nm.GetRoutesFirewallRules(), nm.GetRoutesFirewallRulesIsEmpty())
	}
	wait("router", func(nm *mgmtpb.NetworkMap) bool {
		rr := nm.GetRoutesFirewallRules()
		return hasRoute(nm) && len(rr) == 1 && len(rr[0].GetSourceRanges()) == 1 && rr[0].GetSourceRanges()[0] == "0.0.0.0/0" &&
			rr[0].GetDestination() == "10.1.0.0/16" && rr[0].GetRouteID() == routeID && rr[0].GetProtocol() == mgmtpb.RuleProtocol_ALL &&
			rr[0].GetAction() == mgmtpb.RuleAction_ACCEPT && !nm.GetRoutesFirewallRulesIsEmpty()
	})

	rt["enabled"] = false
	delete(rt, "id")
	delete(rt, "network_type")
	o.call("PUT", "/api/routes/"+routeID, rt, 200)
	for _, name := range []string{"client", "router"} {
		wait(name, func(nm *mgmtpb.NetworkMap) bool {
			return len(nm.GetRoutes()) == 0 && len(nm.GetRoutesFirewallRules()) == 0 && nm.GetRoutesFirewallRulesIsEmpty()
		})
	}
}
