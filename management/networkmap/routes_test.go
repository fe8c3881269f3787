package networkmap

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
)

// routeFixture: clients c1 (group clients), c2 (group others), routing
// peers r1, r2 (group routers), a pending peer pend (in clients, waiting
// for approval) and a temporary peer tmp. Keys are named after the peers
// in the summaries.
type routeFixture struct {
	acc   account.Account
	peers []account.Peer
	names map[key.Public]string
}

func newRouteFixture() routeFixture {
	f := routeFixture{acc: account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 1},
		names: map[key.Public]string{}}
	for i, id := range []account.PeerID{"c1", "c2", "r1", "r2", "pend", "tmp"} {
		p := account.Peer{ID: id, Key: key.Public{byte(i + 1)}, IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(i + 1)}), DNSLabel: string(id)}
		p.ApprovalRequired = id == "pend"
		p.Temporary = id == "tmp"
		f.names[p.Key] = string(id)
		f.peers = append(f.peers, p)
	}
	return f
}

func routeGroups() []account.Group {
	return []account.Group{
		{ID: "all", Name: "All", All: true},
		{ID: "clients", Peers: []account.PeerID{"c1", "pend"}},
		{ID: "others", Peers: []account.PeerID{"c2"}},
		{ID: "routers", Peers: []account.PeerID{"r1", "r2"}},
		{ID: "acg", Peers: nil}, // an access control group: names no peer
		{ID: "acg2", Peers: nil},
	}
}

// accept is an enabled accept rule between groups.
func accept(id string, src, dst []account.GroupID, proto string, ports ...uint16) account.Rule {
	return account.Rule{ID: id, Enabled: true, Action: account.ActionAccept, Protocol: proto, Sources: src, Destinations: dst, Ports: ports}
}

func policy(id account.PolicyID, rules ...account.Rule) account.Policy {
	return account.Policy{ID: id, Enabled: true, Rules: rules}
}

func gs(ids ...account.GroupID) []account.GroupID { return ids }

// seeRouters lets clients and routers connect (what classic routes need).
var seeRouters = policy("see", accept("see", gs("clients", "others"), gs("routers"), account.ProtoAll))

func (f routeFixture) route(r Route) string {
	dst := r.Network.String()
	if r.Dynamic() {
		dst = strings.Join(r.Domains, ",")
	}
	return fmt.Sprintf("%s net=%s dst=%s via=%s metric=%d masq=%t keep=%t skip=%t", r.ID, r.NetID, dst, f.names[r.Peer], r.Metric, r.Masquerade, r.KeepRoute, r.SkipAutoApply)
}

func (f routeFixture) rule(r RouteRule) string {
	dst := r.Destination.String()
	if len(r.Domains) > 0 {
		dst = strings.Join(r.Domains, ",")
	}
	return fmt.Sprintf("%s from=%v %s %s dst=%s ports=%v ranges=%v policy=%s", r.RouteID, r.Sources, r.Action, r.Protocol, dst, r.Ports, r.Ranges, r.PolicyID)
}

// view is what the routing part of one peer's map says.
type view struct {
	Routes []string
	Rules  []string
	Peers  []account.PeerID
}

func (f routeFixture) view(t *testing.T, access Access, self account.PeerID) view {
	t.Helper()
	m, ok := Compute(f.acc, f.peers, access, self)
	if !ok {
		t.Fatalf("%s: not in the state", self)
	}
	var v view
	for _, r := range m.Routes {
		v.Routes = append(v.Routes, f.route(r))
	}
	for _, r := range m.RouteRules {
		v.Rules = append(v.Rules, f.rule(r))
	}
	v.Peers = peerIDs(m)
	return v
}

var (
	lan     = netip.MustParsePrefix("10.1.0.0/16")
	dbHost  = netip.MustParsePrefix("10.9.0.5/32")
	anyIPv4 = "0.0.0.0/0"
)

func TestRoutesClassic(t *testing.T) {
	f := newRouteFixture()
	single := account.Route{ID: "rt", NetID: "lan", Enabled: true, Peer: "r1", Network: lan, Metric: 9999, Masquerade: true, Groups: gs("clients")}
	ha := account.Route{ID: "ha", NetID: "lan", Enabled: true, PeerGroups: gs("routers"), Network: lan, Metric: 100, Groups: gs("clients", "others")}
	tests := []struct {
		name     string
		routes   []account.Route
		policies []account.Policy
		want     map[account.PeerID]view
	}{{
		name:   "single routing peer, distribution group",
		routes: []account.Route{single}, policies: []account.Policy{seeRouters},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{"rt net=lan dst=10.1.0.0/16 via=r1 metric=9999 masq=true keep=false skip=false"}, Peers: []account.PeerID{"r1", "r2"}},
			// c2 sees r1 but is in no distribution group.
			"c2": {Peers: []account.PeerID{"r1", "r2"}},
			// The routing peer gets its route whatever the distribution
			// groups, with its own key, and the accept-all rule of a route
			// without access control groups.
			"r1": {Routes: []string{"rt net=lan dst=10.1.0.0/16 via=r1 metric=9999 masq=true keep=false skip=false"},
				Rules: []string{"rt from=[0.0.0.0/0] accept all dst=10.1.0.0/16 ports=[] ranges=[] policy="}, Peers: []account.PeerID{"c1", "c2"}},
			"r2":   {Peers: []account.PeerID{"c1", "c2"}},
			"pend": {},
			"tmp":  {},
		},
	}, {
		name:   "no policy lets the client see the routing peer",
		routes: []account.Route{single}, policies: []account.Policy{policy("other", accept("x", gs("clients"), gs("others"), account.ProtoAll))},
		want: map[account.PeerID]view{
			"c1": {Peers: []account.PeerID{"c2"}},
			"r1": {Routes: []string{"rt net=lan dst=10.1.0.0/16 via=r1 metric=9999 masq=true keep=false skip=false"},
				Rules: []string{"rt from=[0.0.0.0/0] accept all dst=10.1.0.0/16 ports=[] ranges=[] policy="}},
		},
	}, {
		name:   "peer groups: one route per routing peer, same NetID; a routing peer gets only its own of the HA group",
		routes: []account.Route{ha}, policies: []account.Policy{seeRouters},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{
				"ha:r1 net=lan dst=10.1.0.0/16 via=r1 metric=100 masq=false keep=false skip=false",
				"ha:r2 net=lan dst=10.1.0.0/16 via=r2 metric=100 masq=false keep=false skip=false",
			}, Peers: []account.PeerID{"r1", "r2"}},
			"c2": {Routes: []string{
				"ha:r1 net=lan dst=10.1.0.0/16 via=r1 metric=100 masq=false keep=false skip=false",
				"ha:r2 net=lan dst=10.1.0.0/16 via=r2 metric=100 masq=false keep=false skip=false",
			}, Peers: []account.PeerID{"r1", "r2"}},
			"r2": {Routes: []string{"ha:r2 net=lan dst=10.1.0.0/16 via=r2 metric=100 masq=false keep=false skip=false"},
				Rules: []string{"ha:r2 from=[0.0.0.0/0] accept all dst=10.1.0.0/16 ports=[] ranges=[] policy="}, Peers: []account.PeerID{"c1", "c2"}},
			"pend": {},
		},
	}, {
		name: "disabled route: nobody; and it still keeps its routing peer out of the HA group",
		routes: []account.Route{
			{ID: "off", NetID: "lan", Enabled: false, Peer: "r1", Network: lan, Metric: 1, Groups: gs("clients", "routers")},
			{ID: "on", NetID: "lan", Enabled: true, Peer: "r2", Network: lan, Metric: 1, Groups: gs("clients", "routers")},
		},
		policies: []account.Policy{seeRouters, policy("rr", accept("rr", gs("routers"), gs("routers"), account.ProtoAll))},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{"on net=lan dst=10.1.0.0/16 via=r2 metric=1 masq=false keep=false skip=false"}, Peers: []account.PeerID{"r1", "r2"}},
			"r1": {Peers: []account.PeerID{"c1", "c2", "r2"}},
		},
	}, {
		name: "access control groups: rules from the policies to the group, sources also in the distribution groups",
		routes: []account.Route{{ID: "rt", NetID: "lan", Enabled: true, Peer: "r1", Network: lan, Metric: 10,
			Groups: gs("clients"), AccessControlGroups: gs("acg")}},
		policies: []account.Policy{seeRouters,
			policy("web", accept("https", gs("clients", "others"), gs("acg"), account.ProtoTCP, 443)),
			{ID: "ssh", Enabled: true, Rules: []account.Rule{{ID: "ssh", Enabled: true, Action: account.ActionDrop, Protocol: account.ProtoTCP,
				Sources: gs("clients"), Destinations: gs("acg"), PortRanges: []account.PortRange{{Start: 22, End: 23}}}}},
			{ID: "off", Enabled: false, Rules: []account.Rule{accept("off", gs("clients"), gs("acg"), account.ProtoAll)}},
		},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{"rt net=lan dst=10.1.0.0/16 via=r1 metric=10 masq=false keep=false skip=false"}, Peers: []account.PeerID{"r1", "r2"}},
			"r1": {Routes: []string{"rt net=lan dst=10.1.0.0/16 via=r1 metric=10 masq=false keep=false skip=false"},
				Rules: []string{
					"rt from=[100.70.0.1/32] drop tcp dst=10.1.0.0/16 ports=[] ranges=[{22 23}] policy=ssh",
					"rt from=[100.70.0.1/32] accept tcp dst=10.1.0.0/16 ports=[443] ranges=[] policy=web",
				}, Peers: []account.PeerID{"c1", "c2"}},
		},
	}, {
		name: "a rule naming two of the route's access control groups gives one route rule",
		routes: []account.Route{{ID: "rt", NetID: "lan", Enabled: true, Peer: "r1", Network: lan, Metric: 10,
			Groups: gs("clients"), AccessControlGroups: gs("acg", "acg2")}},
		policies: []account.Policy{seeRouters, policy("web", accept("https", gs("clients"), gs("acg", "acg2"), account.ProtoTCP, 443))},
		want: map[account.PeerID]view{
			"r1": {Routes: []string{"rt net=lan dst=10.1.0.0/16 via=r1 metric=10 masq=false keep=false skip=false"},
				Rules: []string{"rt from=[100.70.0.1/32] accept tcp dst=10.1.0.0/16 ports=[443] ranges=[] policy=web"}, Peers: []account.PeerID{"c1", "c2"}},
		},
	}, {
		name: "exit node: 0.0.0.0/0 as is, skipAutoApply passed; ::/0 reaches no one (no IPv6 overlay)",
		routes: []account.Route{
			{ID: "exit", NetID: "exit", Enabled: true, Peer: "r1", Network: netip.MustParsePrefix("0.0.0.0/0"), Metric: 9999, Masquerade: true, Groups: gs("all"), SkipAutoApply: true},
			{ID: "exit6", NetID: "exit6", Enabled: true, Peer: "r1", Network: netip.MustParsePrefix("::/0"), Metric: 9999, Masquerade: true, Groups: gs("all")},
		},
		policies: []account.Policy{seeRouters},
		want: map[account.PeerID]view{
			"c2": {Routes: []string{"exit net=exit dst=0.0.0.0/0 via=r1 metric=9999 masq=true keep=false skip=true"}, Peers: []account.PeerID{"r1", "r2"}},
			"r1": {Routes: []string{"exit net=exit dst=0.0.0.0/0 via=r1 metric=9999 masq=true keep=false skip=true"},
				Rules: []string{"exit from=[0.0.0.0/0] accept all dst=0.0.0.0/0 ports=[] ranges=[] policy="}, Peers: []account.PeerID{"c1", "c2"}},
			"tmp": {},
		},
	}, {
		name: "domain route",
		routes: []account.Route{{ID: "dom", NetID: "corp", Enabled: true, Peer: "r2", Domains: []string{"*.corp.example", "corp.example"},
			KeepRoute: true, Metric: 5, Groups: gs("clients")}},
		policies: []account.Policy{seeRouters},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{"dom net=corp dst=*.corp.example,corp.example via=r2 metric=5 masq=false keep=true skip=false"}, Peers: []account.PeerID{"r1", "r2"}},
			"r2": {Routes: []string{"dom net=corp dst=*.corp.example,corp.example via=r2 metric=5 masq=false keep=true skip=false"},
				Rules: []string{"dom from=[0.0.0.0/0] accept all dst=*.corp.example,corp.example ports=[] ranges=[] policy="}, Peers: []account.PeerID{"c1", "c2"}},
		},
	}, {
		name:   "a pending or temporary routing peer serves nothing",
		routes: []account.Route{{ID: "p", NetID: "lan", Enabled: true, Peer: "pend", Network: lan, Groups: gs("all")}, {ID: "t", NetID: "lan2", Enabled: true, Peer: "tmp", Network: lan, Groups: gs("all")}},
		policies: []account.Policy{policy("all", accept("all", gs("all"), gs("all"), account.ProtoAll)),
			{ID: "tp", Enabled: true, Rules: []account.Rule{{ID: "tp", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll, SourcePeer: "c1", DestinationPeer: "tmp"}}}},
		want: map[account.PeerID]view{
			"c1":   {Peers: []account.PeerID{"c2", "r1", "r2", "tmp"}},
			"pend": {},
			"tmp":  {Peers: []account.PeerID{"c1"}},
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			access := Access{Groups: routeGroups(), Policies: tc.policies, Routes: tc.routes}
			for self, want := range tc.want {
				if d := cmp.Diff(want, f.view(t, access, self)); d != "" {
					t.Errorf("%s (-want +got):\n%s", self, d)
				}
			}
		})
	}
}

func TestRoutesResources(t *testing.T) {
	f := newRouteFixture()
	host := account.NetworkResource{ID: "res", NetworkID: "n1", Name: "db", Type: account.ResourceHost, Prefix: dbHost, Enabled: true, Groups: gs("resgrp")}
	dom := account.NetworkResource{ID: "wiki", NetworkID: "n1", Name: "wiki", Type: account.ResourceDomain, Domain: "wiki.corp.example", Enabled: true, Groups: gs("resgrp")}
	r1 := account.NetworkRouter{ID: "nr1", NetworkID: "n1", Peer: "r1", Metric: 100, Masquerade: true, Enabled: true}
	both := account.NetworkRouter{ID: "nr2", NetworkID: "n1", PeerGroups: gs("routers"), Metric: 50, Enabled: true}
	toGroup := policy("db", accept("db", gs("clients"), gs("resgrp"), account.ProtoTCP, 5432))
	toRes := policy("res", account.Rule{ID: "res", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll, Sources: gs("clients", "others"), DestinationResource: "res"})
	disabled := func(r account.NetworkRouter) account.NetworkRouter { r.Enabled = false; return r }
	offRes := host
	offRes.Enabled = false
	posture := toGroup
	posture.PostureChecks = []string{"new"}
	tests := []struct {
		name      string
		resources []account.NetworkResource
		routers   []account.NetworkRouter
		policies  []account.Policy
		checks    []account.PostureCheck
		meta      map[account.PeerID]string // NetbirdVersion
		want      map[account.PeerID]view
	}{{
		name:      "via a group of the resource: the client gets the route and sees the router, the router the client",
		resources: []account.NetworkResource{host}, routers: []account.NetworkRouter{r1}, policies: []account.Policy{toGroup},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=100 masq=true keep=true skip=false"}, Peers: []account.PeerID{"r1"}},
			"c2": {},
			"r1": {Routes: []string{"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=100 masq=true keep=true skip=false"},
				Rules: []string{"res:r1 from=[100.70.0.1/32] accept tcp dst=10.9.0.5/32 ports=[5432] ranges=[] policy=db"}, Peers: []account.PeerID{"c1"}},
			"r2":   {},
			"pend": {},
		},
	}, {
		name:      "via DestinationResource, routers from peer groups (HA)",
		resources: []account.NetworkResource{host}, routers: []account.NetworkRouter{both}, policies: []account.Policy{toRes},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{
				"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=50 masq=false keep=true skip=false",
				"res:r2 net=db dst=10.9.0.5/32 via=r2 metric=50 masq=false keep=true skip=false",
			}, Peers: []account.PeerID{"r1", "r2"}},
			"c2": {Routes: []string{
				"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=50 masq=false keep=true skip=false",
				"res:r2 net=db dst=10.9.0.5/32 via=r2 metric=50 masq=false keep=true skip=false",
			}, Peers: []account.PeerID{"r1", "r2"}},
			"r2": {Routes: []string{"res:r2 net=db dst=10.9.0.5/32 via=r2 metric=50 masq=false keep=true skip=false"},
				Rules: []string{"res:r2 from=[100.70.0.1/32 100.70.0.2/32] accept all dst=10.9.0.5/32 ports=[] ranges=[] policy=res"}, Peers: []account.PeerID{"c1", "c2"}},
		},
	}, {
		name:      "a peer in two routers of the network keeps the first by ID",
		resources: []account.NetworkResource{host}, routers: []account.NetworkRouter{both, r1}, policies: []account.Policy{toGroup},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{
				"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=100 masq=true keep=true skip=false",
				"res:r2 net=db dst=10.9.0.5/32 via=r2 metric=50 masq=false keep=true skip=false",
			}, Peers: []account.PeerID{"r1", "r2"}},
		},
	}, {
		name:      "domain resource",
		resources: []account.NetworkResource{dom}, routers: []account.NetworkRouter{r1}, policies: []account.Policy{toGroup},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{"wiki:r1 net=wiki dst=wiki.corp.example via=r1 metric=100 masq=true keep=true skip=false"}, Peers: []account.PeerID{"r1"}},
			"r1": {Routes: []string{"wiki:r1 net=wiki dst=wiki.corp.example via=r1 metric=100 masq=true keep=true skip=false"},
				Rules: []string{"wiki:r1 from=[100.70.0.1/32] accept tcp dst=wiki.corp.example ports=[5432] ranges=[] policy=db"}, Peers: []account.PeerID{"c1"}},
		},
	}, {
		name:      "disabled router, disabled resource, no policy: nothing for anyone",
		resources: []account.NetworkResource{host, offRes}, routers: []account.NetworkRouter{disabled(r1)}, policies: []account.Policy{toGroup},
		want: map[account.PeerID]view{"c1": {}, "r1": {}},
	}, {
		name:      "disabled resource",
		resources: []account.NetworkResource{offRes}, routers: []account.NetworkRouter{r1}, policies: []account.Policy{toGroup},
		want: map[account.PeerID]view{"c1": {}, "r1": {}},
	}, {
		name:      "no policy names the resource: not even its router gets it",
		resources: []account.NetworkResource{host}, routers: []account.NetworkRouter{r1}, policies: []account.Policy{seeRouters},
		want: map[account.PeerID]view{"c1": {Peers: []account.PeerID{"r1", "r2"}}, "r1": {Peers: []account.PeerID{"c1", "c2"}}},
	}, {
		name:      "posture checks apply to the sources",
		resources: []account.NetworkResource{host}, routers: []account.NetworkRouter{r1}, policies: []account.Policy{posture},
		checks: []account.PostureCheck{{ID: "new", Checks: account.Checks{NBVersion: &account.MinVersion{MinVersion: "0.50.0"}}}},
		meta:   map[account.PeerID]string{"c1": "0.40.0"},
		// As the reference: the router still gets the route of a resource
		// a policy names, with no rule (nobody may use it).
		want: map[account.PeerID]view{"c1": {}, "r1": {Routes: []string{"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=100 masq=true keep=true skip=false"}}},
	}, {
		name:      "posture checks passed",
		resources: []account.NetworkResource{host}, routers: []account.NetworkRouter{r1}, policies: []account.Policy{posture},
		checks: []account.PostureCheck{{ID: "new", Checks: account.Checks{NBVersion: &account.MinVersion{MinVersion: "0.50.0"}}}},
		meta:   map[account.PeerID]string{"c1": "0.77.1"},
		want: map[account.PeerID]view{
			"c1": {Routes: []string{"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=100 masq=true keep=true skip=false"}, Peers: []account.PeerID{"r1"}},
			"r1": {Routes: []string{"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=100 masq=true keep=true skip=false"},
				Rules: []string{"res:r1 from=[100.70.0.1/32] accept tcp dst=10.9.0.5/32 ports=[5432] ranges=[] policy=db"}, Peers: []account.PeerID{"c1"}},
		},
	}, {
		name:      "a temporary peer named as source gets no route",
		resources: []account.NetworkResource{host}, routers: []account.NetworkRouter{r1},
		policies: []account.Policy{{ID: "t", Enabled: true, Rules: []account.Rule{{ID: "t", Enabled: true, Action: account.ActionAccept,
			Protocol: account.ProtoAll, SourcePeer: "tmp", DestinationResource: "res"}}}},
		want: map[account.PeerID]view{"tmp": {}, "r1": {Routes: []string{"res:r1 net=db dst=10.9.0.5/32 via=r1 metric=100 masq=true keep=true skip=false"}}},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := f
			f.peers = slices.Clone(f.peers)
			for i := range f.peers {
				f.peers[i].Meta.NetbirdVersion = tc.meta[f.peers[i].ID]
			}
			access := Access{Groups: append(routeGroups(), account.Group{ID: "resgrp"}), Policies: tc.policies, PostureChecks: tc.checks,
				Resources: tc.resources, Routers: tc.routers}
			for self, want := range tc.want {
				if d := cmp.Diff(want, f.view(t, access, self)); d != "" {
					t.Errorf("%s (-want +got):\n%s", self, d)
				}
			}
		})
	}
}

// TestRoutesSignature: a route change changes exactly the signatures of
// the peers whose maps change, and Pair agrees with Compute on the peers
// resources show.
func TestRoutesSignature(t *testing.T) {
	f := newRouteFixture()
	base := Access{Groups: append(routeGroups(), account.Group{ID: "resgrp"}), Policies: []account.Policy{seeRouters,
		policy("db", accept("db", gs("clients"), gs("resgrp"), account.ProtoTCP, 5432))},
		Routes:    []account.Route{{ID: "rt", NetID: "lan", Enabled: true, Peer: "r1", Network: lan, Groups: gs("others")}},
		Resources: []account.NetworkResource{{ID: "res", NetworkID: "n1", Name: "db", Type: account.ResourceHost, Prefix: dbHost, Enabled: true, Groups: gs("resgrp")}},
		Routers:   []account.NetworkRouter{{ID: "nr", NetworkID: "n1", Peer: "r2", Enabled: true, Metric: 10}},
	}
	clone := func(a Access) Access {
		a.Routes, a.Resources, a.Routers, a.Policies = slices.Clone(a.Routes), slices.Clone(a.Resources), slices.Clone(a.Routers), slices.Clone(a.Policies)
		return a
	}
	tests := []struct {
		name    string
		change  func(*Access)
		changed []account.PeerID
	}{
		{"route metric: its routing peer and the clients in its distribution group", func(a *Access) { a.Routes[0].Metric = 7 }, []account.PeerID{"c2", "r1"}},
		{"route distribution group", func(a *Access) { a.Routes[0].Groups = gs("clients") }, []account.PeerID{"c1", "c2"}},
		{"route disabled", func(a *Access) { a.Routes[0].Enabled = false }, []account.PeerID{"c2", "r1"}},
		{"access control group set", func(a *Access) { a.Routes[0].AccessControlGroups = gs("acg") }, []account.PeerID{"r1"}},
		{"router metric", func(a *Access) { a.Routers[0].Metric = 1 }, []account.PeerID{"c1", "r2"}},
		{"router moved", func(a *Access) { a.Routers[0].Peer = "r1" }, []account.PeerID{"c1", "r1", "r2"}},
		{"resource address", func(a *Access) { a.Resources[0].Prefix = lan }, []account.PeerID{"c1", "r2"}},
		{"resource policy port", func(a *Access) {
			a.Policies[1].Rules = []account.Rule{accept("db", gs("clients"), gs("resgrp"), account.ProtoTCP, 5433)}
		}, []account.PeerID{"r2"}},
		{"resource policy source", func(a *Access) {
			a.Policies[1].Rules = []account.Rule{accept("db", gs("others"), gs("resgrp"), account.ProtoTCP, 5432)}
		}, []account.PeerID{"c1", "c2", "r2"}},
		{"unrelated route in no one's reach", func(a *Access) {
			a.Routes = append(a.Routes, account.Route{ID: "x", NetID: "x", Enabled: false, Peer: "r1", Network: dbHost, Groups: gs("all")})
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			old := NewIndex(f.acc, f.peers, base)
			next := clone(base)
			tc.change(&next)
			cur := NewIndex(f.acc, f.peers, next)
			if _, ok := PeerLocal(old, cur); ok {
				t.Errorf("PeerLocal: ok for a change of routes")
			}
			var got []account.PeerID
			for _, p := range f.peers {
				a, _ := old.Signature(p.ID)
				b, _ := cur.Signature(p.ID)
				ma, _ := old.Compute(p.ID)
				mb, _ := cur.Compute(p.ID)
				differ := f.summary(ma) != f.summary(mb)
				// The signature may change for an unchanged map (a rule
				// naming the peer changed: the stream then compares what
				// it encodes and sends nothing), never the other way.
				if differ && a == b {
					t.Errorf("%s: map changed, signature did not", p.ID)
				}
				if differ {
					got = append(got, p.ID)
				}
				if routesDiffer := f.routesOnly(ma) != f.routesOnly(mb); routesDiffer && SameRoutes(old, cur, p.ID) {
					t.Errorf("%s: SameRoutes with routes changed", p.ID)
				}
				for _, q := range f.peers {
					if vis, _ := cur.Pair(p.ID, q.ID); vis != slices.Contains(peerIDs(mb), q.ID) {
						t.Errorf("Pair(%s, %s) visible=%t, map says otherwise", p.ID, q.ID, vis)
					}
				}
			}
			if d := cmp.Diff(tc.changed, got); d != "" {
				t.Errorf("maps changed (-want +got):\n%s", d)
			}
		})
	}
}

func (f routeFixture) summary(m Map) string {
	return f.routesOnly(m) + fmt.Sprint(peerIDs(m))
}

func (f routeFixture) routesOnly(m Map) string {
	var b strings.Builder
	for _, r := range m.Routes {
		b.WriteString(f.route(r) + "\n")
	}
	for _, r := range m.RouteRules {
		b.WriteString(f.rule(r) + "\n")
	}
	return b.String()
}

// TestRoutesPeerLocal: with routes and resources in the account, a change
// in some peers still passes as peer-local, and every other peer either
// gets a right map from Pair deltas or is told its routes changed
// (SameRoutes false: a whole map); a group named only by a route, changed
// for an unchanged peer, is a broader change.
func TestRoutesPeerLocal(t *testing.T) {
	f := newRouteFixture()
	access := Access{Groups: append(routeGroups(), account.Group{ID: "resgrp"}), Policies: []account.Policy{seeRouters,
		policy("db", accept("db", gs("clients"), gs("resgrp"), account.ProtoTCP, 5432))},
		Routes: []account.Route{
			{ID: "rt", NetID: "lan", Enabled: true, PeerGroups: gs("routers"), Network: lan, Groups: gs("others")},
			{ID: "dist", NetID: "dist", Enabled: true, Peer: "r1", Network: dbHost, Groups: gs("dist")},
		},
		Resources: []account.NetworkResource{{ID: "res", NetworkID: "n1", Name: "db", Type: account.ResourceHost, Prefix: dbHost, Enabled: true, Groups: gs("resgrp")}},
		Routers:   []account.NetworkRouter{{ID: "nr", NetworkID: "n1", Peer: "r2", Enabled: true, Metric: 10}},
	}
	access.Groups = append(access.Groups, account.Group{ID: "dist"})
	old := NewIndex(f.acc, f.peers, access)

	// A new client joins clients: the resource's router gains a source.
	joined := slices.Clone(f.peers)
	joined = append(joined, account.Peer{ID: "c3", Key: key.Public{9}, IP: netip.MustParseAddr("100.70.0.9"), DNSLabel: "c3"})
	grown := access
	grown.Groups = slices.Clone(access.Groups)
	grown.Groups[1].Peers = append(slices.Clone(grown.Groups[1].Peers), "c3")
	cur := NewIndex(f.acc, joined, grown)
	changes, ok := PeerLocal(old, cur)
	if !ok || len(changes) != 1 || changes[0].ID != "c3" {
		t.Fatalf("PeerLocal = %v, %t; want c3 alone", changes, ok)
	}
	var whole []account.PeerID
	for _, p := range f.peers {
		before, _ := old.Compute(p.ID)
		want, _ := cur.Compute(p.ID)
		if !SameRoutes(old, cur, p.ID) {
			whole = append(whole, p.ID)
			continue
		}
		if f.routesOnly(before) != f.routesOnly(want) {
			t.Errorf("%s: routes changed but SameRoutes", p.ID)
		}
		if got := applyPair(before, old, cur, p.ID, changes); !sameMap(got, want) {
			t.Errorf("%s: delta gives %s, want %s", p.ID, describe(got), describe(want))
		}
	}
	if d := cmp.Diff([]account.PeerID{"r2"}, whole); d != "" {
		t.Errorf("peers needing a whole map (-want +got):\n%s", d)
	}

	// c2 (unchanged) added to a group only a route names.
	moved := access
	moved.Groups = slices.Clone(access.Groups)
	moved.Groups[len(moved.Groups)-1].Peers = []account.PeerID{"c2"}
	if _, ok := PeerLocal(old, NewIndex(f.acc, f.peers, moved)); ok {
		t.Errorf("PeerLocal: ok for a route's distribution group gaining an unchanged peer")
	}
}
