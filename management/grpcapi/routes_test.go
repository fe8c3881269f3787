package grpcapi

import (
	"hash/maphash"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// clientRoute is a Route as the official client (v0.77.1) reads it: the
// network parsed (and masked) only when there are no domains.
type clientRoute struct {
	ID, NetID, Peer        string
	Network                netip.Prefix
	Domains                []string
	NetworkType            int64
	Metric                 int64
	Masquerade, Keep, Skip bool
}

// clientRouteRule is a RouteFirewallRule as the official client reads it:
// every source parsed, the destination parsed unless dynamic, the port
// from PortInfo.
type clientRouteRule struct {
	Sources     []netip.Prefix
	Destination netip.Prefix // unset when dynamic
	Domains     []string
	Dynamic     bool
	Action      mgmtpb.RuleAction
	Protocol    mgmtpb.RuleProtocol
	Port        uint32
	Range       [2]uint32
	PolicyID    string
	RouteID     string
}

func readRoutes(t *testing.T, nm *mgmtpb.NetworkMap) ([]clientRoute, []clientRouteRule) {
	t.Helper()
	var rs []clientRoute
	for _, r := range nm.GetRoutes() {
		cr := clientRoute{ID: r.GetID(), NetID: r.GetNetID(), Peer: r.GetPeer(), Domains: r.GetDomains(), NetworkType: r.GetNetworkType(),
			Metric: r.GetMetric(), Masquerade: r.GetMasquerade(), Keep: r.GetKeepRoute(), Skip: r.GetSkipAutoApply()}
		if _, err := netip.ParsePrefix(r.GetNetwork()); err != nil {
			t.Errorf("route %s: network %q does not parse (the reference always fills it): %v", r.GetID(), r.GetNetwork(), err)
		}
		if len(cr.Domains) == 0 {
			cr.Network = netip.MustParsePrefix(r.GetNetwork()).Masked()
		}
		if _, err := key.ParsePublic(cr.Peer); err != nil {
			t.Errorf("route %s: peer %q is no key", r.GetID(), cr.Peer)
		}
		rs = append(rs, cr)
	}
	var rules []clientRouteRule
	for _, r := range nm.GetRoutesFirewallRules() {
		cr := clientRouteRule{Domains: r.GetDomains(), Dynamic: r.GetIsDynamic(), Action: r.GetAction(), Protocol: r.GetProtocol(),
			PolicyID: string(r.GetPolicyID()), RouteID: r.GetRouteID()}
		if len(r.GetSourceRanges()) == 0 {
			t.Errorf("rule of %s without sources: the client skips it", cr.RouteID)
		}
		for _, s := range r.GetSourceRanges() {
			cr.Sources = append(cr.Sources, netip.MustParsePrefix(s))
		}
		if !cr.Dynamic {
			cr.Destination = netip.MustParsePrefix(r.GetDestination())
		}
		if r.GetPortInfo() == nil {
			t.Errorf("rule of %s without PortInfo", cr.RouteID)
		}
		switch p := r.GetPortInfo().GetPortSelection().(type) {
		case *mgmtpb.PortInfo_Port:
			cr.Port = p.Port
		case *mgmtpb.PortInfo_Range_:
			cr.Range = [2]uint32{p.Range.GetStart(), p.Range.GetEnd()}
		}
		rules = append(rules, cr)
	}
	// The official client treats an empty list without the flag as an old
	// server's and lets all routed traffic through.
	if len(rules) == 0 && !nm.GetRoutesFirewallRulesIsEmpty() || len(rules) > 0 && nm.GetRoutesFirewallRulesIsEmpty() {
		t.Errorf("routesFirewallRulesIsEmpty=%t with %d rules", nm.GetRoutesFirewallRulesIsEmpty(), len(rules))
	}
	return rs, rules
}

// TestRoutesOnTheWire: a whole map, encoded as streams send it, carries
// routes and route firewall rules field by field as NetBird's client reads
// them: a classic HA route, an exit node, a domain route with access
// control, a network resource.
func TestRoutesOnTheWire(t *testing.T) {
	acc := account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 3}
	keys := map[account.PeerID]key.Public{}
	var peers []account.Peer
	for i, id := range []account.PeerID{"c1", "r1", "r2"} {
		k, _ := key.NewPrivate()
		keys[id] = k.Public()
		peers = append(peers, account.Peer{ID: id, Key: k.Public(), IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(i + 1)}), DNSLabel: string(id)})
	}
	access := networkmap.Access{
		Groups: []account.Group{{ID: "all", All: true}, {ID: "clients", Peers: []account.PeerID{"c1"}}, {ID: "routers", Peers: []account.PeerID{"r1", "r2"}},
			{ID: "acg"}, {ID: "resgrp"}},
		Policies: []account.Policy{
			{ID: "see", Enabled: true, Rules: []account.Rule{{ID: "see", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll,
				Sources: []account.GroupID{"clients"}, Destinations: []account.GroupID{"routers"}}}},
			{ID: "web", Enabled: true, Rules: []account.Rule{{ID: "web", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoTCP,
				Sources: []account.GroupID{"clients"}, Destinations: []account.GroupID{"acg"}, Ports: []uint16{443}, PortRanges: []account.PortRange{{Start: 8000, End: 8080}}}}},
			{ID: "db", Enabled: true, Rules: []account.Rule{{ID: "db", Enabled: true, Action: account.ActionDrop, Protocol: account.ProtoUDP,
				Sources: []account.GroupID{"clients"}, DestinationResource: "res"}}},
		},
		Routes: []account.Route{
			{ID: "ha", NetID: "lan", Enabled: true, PeerGroups: []account.GroupID{"routers"}, Network: netip.MustParsePrefix("10.1.0.0/16"), Metric: 100, Masquerade: true, Groups: []account.GroupID{"clients"}},
			{ID: "exit", NetID: "exit", Enabled: true, Peer: "r1", Network: netip.MustParsePrefix("0.0.0.0/0"), Metric: 9999, Masquerade: true, SkipAutoApply: true, Groups: []account.GroupID{"all"}},
			{ID: "dom", NetID: "corp", Enabled: true, Peer: "r2", Domains: []string{"*.corp.example"}, KeepRoute: true, Metric: 1, Groups: []account.GroupID{"clients"}, AccessControlGroups: []account.GroupID{"acg"}},
		},
		Resources: []account.NetworkResource{{ID: "res", NetworkID: "n", Name: "db", Type: account.ResourceSubnet, Prefix: netip.MustParsePrefix("10.9.0.0/24"), Enabled: true}},
		Routers:   []account.NetworkRouter{{ID: "nr", NetworkID: "n", Peer: "r1", Metric: 20, Enabled: true}},
	}
	ix := networkmap.NewIndex(acc, peers, access)
	seed := maphash.MakeSeed()
	decode := func(self account.PeerID) *mgmtpb.NetworkMap {
		m, ok := ix.Compute(self)
		if !ok {
			t.Fatalf("%s: no map", self)
		}
		r, b := syncResponse(m, nil, respFor{}, remoteCache{})
		plain, _ := encodeMap(seed, r, b)
		var got mgmtpb.SyncResponse
		if err := proto.Unmarshal(plain, &got); err != nil {
			t.Fatal(err)
		}
		return got.GetNetworkMap()
	}
	k := func(id account.PeerID) string { return keys[id].String() }
	cmpPrefix := cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })

	routes, rules := readRoutes(t, decode("c1"))
	want := []clientRoute{
		{ID: "dom", NetID: "corp", Peer: k("r2"), Domains: []string{"*.corp.example"}, NetworkType: 3, Metric: 1, Keep: true},
		{ID: "exit", NetID: "exit", Peer: k("r1"), Network: netip.MustParsePrefix("0.0.0.0/0"), NetworkType: 1, Metric: 9999, Masquerade: true, Skip: true},
		{ID: "ha:r1", NetID: "lan", Peer: k("r1"), Network: netip.MustParsePrefix("10.1.0.0/16"), NetworkType: 1, Metric: 100, Masquerade: true},
		{ID: "ha:r2", NetID: "lan", Peer: k("r2"), Network: netip.MustParsePrefix("10.1.0.0/16"), NetworkType: 1, Metric: 100, Masquerade: true},
		{ID: "res:r1", NetID: "db", Peer: k("r1"), Network: netip.MustParsePrefix("10.9.0.0/24"), NetworkType: 1, Metric: 20, Keep: true},
	}
	if d := cmp.Diff(want, routes, cmpPrefix); d != "" {
		t.Errorf("c1 routes (-want +got):\n%s", d)
	}
	if len(rules) != 0 {
		t.Errorf("c1 serves nothing, got route rules %+v", rules)
	}

	c1 := []netip.Prefix{netip.MustParsePrefix("100.70.0.1/32")}
	routes, rules = readRoutes(t, decode("r1"))
	wantR1 := []clientRoute{
		{ID: "exit", NetID: "exit", Peer: k("r1"), Network: netip.MustParsePrefix("0.0.0.0/0"), NetworkType: 1, Metric: 9999, Masquerade: true, Skip: true},
		{ID: "ha:r1", NetID: "lan", Peer: k("r1"), Network: netip.MustParsePrefix("10.1.0.0/16"), NetworkType: 1, Metric: 100, Masquerade: true},
		{ID: "res:r1", NetID: "db", Peer: k("r1"), Network: netip.MustParsePrefix("10.9.0.0/24"), NetworkType: 1, Metric: 20, Keep: true},
	}
	if d := cmp.Diff(wantR1, routes, cmpPrefix); d != "" {
		t.Errorf("r1 routes (-want +got):\n%s", d)
	}
	any4 := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
	wantRules := []clientRouteRule{
		{Sources: any4, Destination: netip.MustParsePrefix("0.0.0.0/0"), Action: mgmtpb.RuleAction_ACCEPT, Protocol: mgmtpb.RuleProtocol_ALL, RouteID: "exit"},
		{Sources: any4, Destination: netip.MustParsePrefix("10.1.0.0/16"), Action: mgmtpb.RuleAction_ACCEPT, Protocol: mgmtpb.RuleProtocol_ALL, RouteID: "ha:r1"},
		{Sources: c1, Destination: netip.MustParsePrefix("10.9.0.0/24"), Action: mgmtpb.RuleAction_DROP, Protocol: mgmtpb.RuleProtocol_UDP, PolicyID: "db", RouteID: "res:r1"},
	}
	if d := cmp.Diff(wantRules, rules, cmpPrefix); d != "" {
		t.Errorf("r1 route rules (-want +got):\n%s", d)
	}

	routes, rules = readRoutes(t, decode("r2"))
	if len(routes) != 2 || routes[0].ID != "dom" || routes[0].Peer != k("r2") || routes[1].ID != "ha:r2" {
		t.Errorf("r2 routes: %+v", routes)
	}
	wantR2 := []clientRouteRule{
		{Sources: c1, Domains: []string{"*.corp.example"}, Dynamic: true, Action: mgmtpb.RuleAction_ACCEPT, Protocol: mgmtpb.RuleProtocol_TCP, Port: 443, PolicyID: "web", RouteID: "dom"},
		{Sources: c1, Domains: []string{"*.corp.example"}, Dynamic: true, Action: mgmtpb.RuleAction_ACCEPT, Protocol: mgmtpb.RuleProtocol_TCP, Range: [2]uint32{8000, 8080}, PolicyID: "web", RouteID: "dom"},
		{Sources: any4, Destination: netip.MustParsePrefix("10.1.0.0/16"), Action: mgmtpb.RuleAction_ACCEPT, Protocol: mgmtpb.RuleProtocol_ALL, RouteID: "ha:r2"},
	}
	if d := cmp.Diff(wantR2, rules, cmpPrefix); d != "" {
		t.Errorf("r2 route rules (-want +got):\n%s", d)
	}

	// Without routes the flag says the list is empty on purpose.
	empty := networkmap.NewIndex(acc, peers, networkmap.Access{Groups: access.Groups, Policies: access.Policies})
	m, _ := empty.Compute("r1")
	r, _ := syncResponse(m, nil, respFor{}, remoteCache{})
	if nm := r.GetNetworkMap(); len(nm.GetRoutes()) != 0 || !nm.GetRoutesFirewallRulesIsEmpty() {
		t.Errorf("no routes: %d routes, routesFirewallRulesIsEmpty=%t", len(nm.GetRoutes()), nm.GetRoutesFirewallRulesIsEmpty())
	}
	if !deletedResponse(1).GetNetworkMap().GetRoutesFirewallRulesIsEmpty() {
		t.Error("deleted response: routesFirewallRulesIsEmpty unset")
	}
}

// TestRoutesDelta: a map delta is refused (whole map instead) for exactly
// the peers whose routes change with a peer-local change.
func TestRoutesDelta(t *testing.T) {
	acc := account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 3}
	mk := func(ids ...account.PeerID) []account.Peer {
		var ps []account.Peer
		for i, id := range ids {
			ps = append(ps, account.Peer{ID: id, Key: key.Public{byte(i + 1)}, IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(i + 1)}), DNSLabel: string(id)})
		}
		return ps
	}
	access := func(clients ...account.PeerID) networkmap.Access {
		return networkmap.Access{
			Groups: []account.Group{{ID: "all", All: true}, {ID: "clients", Peers: clients}, {ID: "resgrp"}},
			Policies: []account.Policy{{ID: "db", Enabled: true, Rules: []account.Rule{{ID: "db", Enabled: true, Action: account.ActionAccept,
				Protocol: account.ProtoAll, Sources: []account.GroupID{"clients"}, Destinations: []account.GroupID{"resgrp"}}}}},
			Resources: []account.NetworkResource{{ID: "res", NetworkID: "n", Name: "db", Type: account.ResourceHost, Prefix: netip.MustParsePrefix("10.9.0.5/32"), Enabled: true, Groups: []account.GroupID{"resgrp"}}},
			Routers:   []account.NetworkRouter{{ID: "nr", NetworkID: "n", Peer: "r", Enabled: true, Metric: 1}},
		}
	}
	old := networkmap.NewIndex(acc, mk("r", "c1", "other"), access("c1"))
	acc.Serial++
	cur := networkmap.NewIndex(acc, mk("r", "c1", "other", "c2"), access("c1", "c2"))
	changes, ok := networkmap.PeerLocal(old, cur)
	if !ok {
		t.Fatal("a new peer is a peer-local change")
	}
	for _, tc := range []struct {
		self   account.PeerID
		whole  bool
		upsert int
	}{
		{"r", true, 0},      // a new source: its route rules change
		{"c1", false, 0},    // unchanged
		{"other", false, 0}, // unchanged
	} {
		d, ok := mapDelta(old, cur, remoteCache{}, tc.self, changes)
		if ok == tc.whole {
			t.Errorf("%s: delta ok=%t, want whole map=%t", tc.self, ok, tc.whole)
		}
		if ok && len(d.GetUpsertPeers()) != tc.upsert {
			t.Errorf("%s: upserts %d, want %d", tc.self, len(d.GetUpsertPeers()), tc.upsert)
		}
	}
}
