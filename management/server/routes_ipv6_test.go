package server_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestRoutesIPv6InMaps: an exit node (0.0.0.0/0) and an IPv6 route made
// through the REST API reach a client on the IPv6 overlay as NetBird
// sends them: the exit node also as ::/0 (ID "<id>-v6-default", NetID
// "<netid>-v6", NetworkType 2), the v6 route as it is; the routing peer
// gets the v6 route firewall rules. A client run with --disable-ipv6 gets
// the exit node's 0.0.0.0/0 only.
func TestRoutesIPv6InMaps(t *testing.T) { engines.Each(t, testRoutesIPv6InMaps) }

func testRoutesIPv6InMaps(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	streams := map[string]*testpeer.Stream{}
	for _, name := range []string{"router", "client", "old"} {
		p := testpeer.New(e.conn, name)
		p.Deltas = name == "router"
		p.IPv6, p.DisableIPv6 = true, name == "old"
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
	exit := obj(o.call("POST", "/api/routes", map[string]any{"description": "", "network_id": "exit", "enabled": true, "peer": ids["router"],
		"network": "0.0.0.0/0", "metric": 9999, "masquerade": true, "groups": []string{all}, "keep_route": false}, 200))["id"].(string)
	lan6 := obj(o.call("POST", "/api/routes", map[string]any{"description": "", "network_id": "lan6", "enabled": true, "peer": ids["router"],
		"network": "fd99::/64", "metric": 100, "masquerade": false, "groups": []string{all}, "keep_route": false}, 200))["id"].(string)

	routes := func(nm *mgmtpb.NetworkMap) []string {
		var out []string
		for _, r := range nm.GetRoutes() {
			out = append(out, fmt.Sprintf("%s %s %s %d", r.GetID(), r.GetNetID(), r.GetNetwork(), r.GetNetworkType()))
		}
		slices.Sort(out)
		return out
	}
	rules := func(nm *mgmtpb.NetworkMap) []string {
		var out []string
		for _, r := range nm.GetRoutesFirewallRules() {
			out = append(out, fmt.Sprintf("%s %v %s", r.GetRouteID(), r.GetSourceRanges(), r.GetDestination()))
		}
		slices.Sort(out)
		return out
	}
	v6Routes := []string{exit + " exit 0.0.0.0/0 1", exit + "-v6-default exit-v6 ::/0 2", lan6 + " lan6 fd99::/64 2"}
	slices.Sort(v6Routes)
	want := map[string][]string{"client": v6Routes, "router": v6Routes, "old": {exit + " exit 0.0.0.0/0 1"}}
	wantRules := []string{exit + " [0.0.0.0/0] 0.0.0.0/0", exit + "-v6-default [::/0] ::/0", lan6 + " [::/0] fd99::/64"}
	slices.Sort(wantRules)
	for name, s := range streams {
		var got, gotRules []string
		err := s.WaitFor(5*time.Second, func([]*mgmtpb.SyncResponse) bool {
			got, gotRules = routes(s.LatestMap()), rules(s.LatestMap())
			return slices.Equal(got, want[name]) && (name != "router" || slices.Equal(gotRules, wantRules))
		})
		if err != nil {
			t.Fatalf("%s: %v\nroutes %v, want %v\nroute rules %v", name, err, got, want[name], gotRules)
		}
	}
}
