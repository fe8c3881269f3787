package networkmap

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
)

var netV6 = netip.MustParsePrefix("fd00:77::/64")

// v6Fixture: peers a, b (v6-active), c (capable, with an address, but in
// no enabled group), d (--disable-ipv6), e (an old agent, no capability),
// f (no v6 address), pend (pending approval) and tmp (temporary, named by
// the enabled group v6). All but tmp are in the All group; the enabled
// groups are v6 (a, b, d, e, f, tmp, pend).
func v6Fixture() (account.Account, []account.Peer, []account.Group) {
	acc := account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), NetworkV6: netV6, Serial: 1}
	acc.Settings.IPv6EnabledGroups = []account.GroupID{"v6"}
	var peers []account.Peer
	for i, id := range []account.PeerID{"a", "b", "c", "d", "e", "f", "pend", "tmp"} {
		p := account.Peer{ID: id, Key: key.Public{byte(i + 1)}, IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(i + 1)}), DNSLabel: string(id), Name: string(id),
			IPv6: netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x77, 15: byte(i + 1)})}
		p.Meta.IPv6Overlay = id != "e"
		p.Meta.Flags.DisableIPv6 = id == "d"
		if id == "f" {
			p.IPv6 = netip.Addr{}
		}
		p.ApprovalRequired = id == "pend"
		p.Temporary = id == "tmp"
		peers = append(peers, p)
	}
	groups := []account.Group{
		{ID: "all", Name: "All", All: true},
		{ID: "v6", Peers: []account.PeerID{"a", "b", "d", "e", "f", "pend", "tmp"}},
		{ID: "web", Peers: []account.PeerID{"a", "b", "c", "d"}},
	}
	return acc, peers, groups
}

// withoutV6 is the same state before the overlay: no v6 network, no v6
// addresses, no capabilities.
func withoutV6(acc account.Account, peers []account.Peer) (account.Account, []account.Peer) {
	acc.NetworkV6 = netip.Prefix{}
	acc.Settings.IPv6EnabledGroups = nil
	out := slices.Clone(peers)
	for i := range out {
		out[i].IPv6 = netip.Addr{}
		out[i].Meta.IPv6Overlay, out[i].Meta.Flags.DisableIPv6 = false, false
	}
	return acc, out
}

func TestV6Active(t *testing.T) {
	acc, peers, groups := v6Fixture()
	ix := NewIndex(acc, peers, Access{Groups: groups})
	want := map[account.PeerID]bool{"a": true, "b": true, "tmp": true}
	for _, p := range peers {
		if got := ix.IsV6(p.ID); got != want[p.ID] {
			t.Errorf("%s: Index v6-active %t, want %t", p.ID, got, want[p.ID])
		}
		// Login decides by V6Active: it must agree with every map.
		if got := V6Active(acc, groups, p); got != want[p.ID] {
			t.Errorf("%s: V6Active %t, want %t", p.ID, got, want[p.ID])
		}
	}
	// The All group enabled: c too; pending and (not named) temporary
	// peers still not; an address outside NetworkV6 never.
	acc.Settings.IPv6EnabledGroups = []account.GroupID{"all"}
	peers[1].IPv6 = netip.MustParseAddr("fd00:99::2")
	ix = NewIndex(acc, peers, Access{Groups: groups})
	want = map[account.PeerID]bool{"a": true, "c": true}
	for _, p := range peers {
		if got, lg := ix.IsV6(p.ID), V6Active(acc, groups, p); got != want[p.ID] || lg != got {
			t.Errorf("All enabled, %s: Index %t, V6Active %t, want %t", p.ID, got, lg, want[p.ID])
		}
	}
	acc.NetworkV6 = netip.Prefix{}
	if ix := NewIndex(acc, peers, Access{Groups: groups}); ix.IsV6("a") || V6Active(acc, groups, peers[0]) {
		t.Error("v6-active without an account v6 network")
	}
}

// TestV6Map: what a v6-active peer's map adds, and that every other peer's
// map is exactly the map of the same state without the overlay.
func TestV6Map(t *testing.T) {
	acc, peers, groups := v6Fixture()
	web := account.Policy{ID: "web", Enabled: true, Rules: []account.Rule{{ID: "r", Enabled: true, Action: account.ActionAccept,
		Protocol: account.ProtoTCP, Ports: []uint16{443}, Sources: gs("web"), Destinations: gs("web"), Bidirectional: false}}}
	drop := account.Policy{ID: "drop", Enabled: true, Rules: []account.Rule{{ID: "d", Enabled: true, Action: account.ActionDrop,
		Protocol: account.ProtoUDP, Sources: gs("all"), Destinations: gs("web")}}}
	for _, tc := range []struct {
		name     string
		policies []account.Policy
		wantA    []string // a's rules
	}{
		{"port policy", []account.Policy{web}, []string{
			"100.70.0.2 in accept tcp [443] web", "100.70.0.2 out accept tcp [443] web",
			"100.70.0.3 in accept tcp [443] web", "100.70.0.3 out accept tcp [443] web",
			"100.70.0.4 in accept tcp [443] web", "100.70.0.4 out accept tcp [443] web",
			"fd00:77::2 in accept tcp [443] web", "fd00:77::2 out accept tcp [443] web",
		}},
		{"allow-all with a drop rule", append(defaults(acc.ID).Policies, drop), []string{
			"100.70.0.2 in drop udp [] drop", "100.70.0.2 out drop udp [] drop", "100.70.0.3 in drop udp [] drop", "100.70.0.3 out drop udp [] drop",
			"100.70.0.4 in drop udp [] drop", "100.70.0.4 out drop udp [] drop", "100.70.0.5 in drop udp [] drop", "100.70.0.6 in drop udp [] drop",
			"fd00:77::2 in drop udp [] drop", "fd00:77::2 out drop udp [] drop",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			access := Access{Groups: groups, Policies: tc.policies}
			ix := NewIndex(acc, peers, access)
			m, _ := ix.Compute("a")
			if addr, ok := m.AddressV6(); !ok || addr != netip.MustParsePrefix("fd00:77::1/64") {
				t.Errorf("a: AddressV6 = %s %t", addr, ok)
			}
			var rules []string
			for _, r := range m.Rules {
				rules = append(rules, fmt.Sprintf("%s %s %s %s %v %s", r.Peer, [2]string{"in", "out"}[r.Direction], r.Action, r.Protocol, r.Ports, r.PolicyID))
			}
			if d := cmp.Diff(tc.wantA, rules); d != "" {
				t.Errorf("a's rules (-want +got):\n%s", d)
			}
			var shown []account.PeerID
			for _, p := range m.Peers {
				if m.ShowsV6(p) {
					shown = append(shown, p.ID)
				}
			}
			if d := cmp.Diff([]account.PeerID{"b"}, shown); d != "" {
				t.Errorf("a shows the v6 address of (-want +got):\n%s", d)
			}
			// Everyone else: the map of the state without the overlay.
			acc0, peers0 := withoutV6(acc, peers)
			ix0 := NewIndex(acc0, peers0, access)
			for _, p := range peers {
				if p.ID == "a" || p.ID == "b" || p.ID == "tmp" {
					continue
				}
				got, _ := ix.Compute(p.ID)
				want, _ := ix0.Compute(p.ID)
				if got.SelfV6 || got.V6 != nil {
					t.Errorf("%s: not v6-active, yet SelfV6 %t V6 %v", p.ID, got.SelfV6, got.V6)
				}
				if !reflect.DeepEqual(got.Rules, want.Rules) || !reflect.DeepEqual(peerIDs(got), peerIDs(want)) ||
					!reflect.DeepEqual(got.Routes, want.Routes) || got.AllowAll != want.AllowAll {
					t.Errorf("%s: map differs from the one without the overlay:\n%v\n%v", p.ID, describe(got), describe(want))
				}
			}
		})
	}
}

// TestV6Routes: v6 routes, the ::/0 mirror of exit nodes and the v6 route
// firewall rules, for v6-active clients and routing peers only.
func TestV6Routes(t *testing.T) {
	f := newRouteFixture()
	f.acc.NetworkV6 = netV6
	f.acc.Settings.IPv6EnabledGroups = []account.GroupID{"all"}
	for i := range f.peers {
		f.peers[i].IPv6 = netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x77, 15: byte(i + 1)})
		// c1 and r1 are v6-active; c2 and r2 run agents without the overlay.
		f.peers[i].Meta.IPv6Overlay = f.peers[i].ID == "c1" || f.peers[i].ID == "r1"
	}
	v6net := netip.MustParsePrefix("fd99::/64")
	exit := account.Route{ID: "ex", NetID: "exit", Enabled: true, PeerGroups: gs("routers"), Network: netip.MustParsePrefix(anyIPv4), Groups: gs("clients", "others")}
	lan6 := account.Route{ID: "l6", NetID: "lan6", Enabled: true, Peer: "r1", Network: v6net, Groups: gs("clients", "others")}
	lan6r2 := account.Route{ID: "l6b", NetID: "lan6b", Enabled: true, Peer: "r2", Network: v6net, Groups: gs("clients")}
	dom := account.Route{ID: "dm", NetID: "dom", Enabled: true, Peer: "r1", Domains: []string{"example.com"}, Groups: gs("clients"), AccessControlGroups: gs("acg")}
	acgPolicy := policy("p-acg", accept("acg", gs("clients", "others"), gs("acg"), account.ProtoTCP, 443))
	access := Access{Groups: routeGroups(), Routes: []account.Route{exit, lan6, lan6r2, dom}, Policies: []account.Policy{seeRouters, acgPolicy}}
	want := map[account.PeerID]view{
		"c1": {Routes: []string{
			"dm net=dom dst=example.com via=r1 metric=0 masq=false keep=false skip=false",
			"ex:r1 net=exit dst=0.0.0.0/0 via=r1 metric=0 masq=false keep=false skip=false",
			"ex:r1-v6-default net=exit-v6 dst=::/0 via=r1 metric=0 masq=false keep=false skip=false",
			"ex:r2 net=exit dst=0.0.0.0/0 via=r2 metric=0 masq=false keep=false skip=false",
			"l6 net=lan6 dst=fd99::/64 via=r1 metric=0 masq=false keep=false skip=false",
		}, Peers: []account.PeerID{"r1", "r2"}},
		"c2": {Routes: []string{
			"ex:r1 net=exit dst=0.0.0.0/0 via=r1 metric=0 masq=false keep=false skip=false",
			"ex:r2 net=exit dst=0.0.0.0/0 via=r2 metric=0 masq=false keep=false skip=false",
		}, Peers: []account.PeerID{"r1", "r2"}},
		"r1": {Routes: []string{
			"dm net=dom dst=example.com via=r1 metric=0 masq=false keep=false skip=false",
			"ex:r1 net=exit dst=0.0.0.0/0 via=r1 metric=0 masq=false keep=false skip=false",
			"ex:r1-v6-default net=exit-v6 dst=::/0 via=r1 metric=0 masq=false keep=false skip=false",
			"l6 net=lan6 dst=fd99::/64 via=r1 metric=0 masq=false keep=false skip=false",
		}, Rules: []string{
			"dm from=[100.70.0.1/32] accept tcp dst=example.com ports=[443] ranges=[] policy=p-acg",
			"dm from=[fd00:77::1/128] accept tcp dst=example.com ports=[443] ranges=[] policy=p-acg",
			"ex:r1 from=[0.0.0.0/0] accept all dst=0.0.0.0/0 ports=[] ranges=[] policy=",
			"ex:r1-v6-default from=[::/0] accept all dst=::/0 ports=[] ranges=[] policy=",
			"l6 from=[::/0] accept all dst=fd99::/64 ports=[] ranges=[] policy=",
		}, Peers: []account.PeerID{"c1", "c2"}},
		// r2 has no overlay: its v6 route is not sent, nor mirrored.
		"r2": {Routes: []string{"ex:r2 net=exit dst=0.0.0.0/0 via=r2 metric=0 masq=false keep=false skip=false"},
			Rules: []string{"ex:r2 from=[0.0.0.0/0] accept all dst=0.0.0.0/0 ports=[] ranges=[] policy="}, Peers: []account.PeerID{"c1", "c2"}},
	}
	for self, w := range want {
		if d := cmp.Diff(w, f.view(t, access, self)); d != "" {
			t.Errorf("%s (-want +got):\n%s", self, d)
		}
	}
	// With access control groups, the exit node's v6 twin lists the
	// v6-active sources only.
	exit.AccessControlGroups = gs("acg")
	access.Routes = []account.Route{exit}
	v := f.view(t, access, "r1")
	if d := cmp.Diff([]string{
		"ex:r1 from=[100.70.0.1/32 100.70.0.2/32] accept tcp dst=0.0.0.0/0 ports=[443] ranges=[] policy=p-acg",
		"ex:r1-v6-default from=[fd00:77::1/128] accept tcp dst=::/0 ports=[443] ranges=[] policy=p-acg",
	}, v.Rules); d != "" {
		t.Errorf("r1 with access control groups (-want +got):\n%s", d)
	}
}

// TestV6Resources: a 0.0.0.0/0 network resource is mirrored as ::/0 and a
// v6 resource is routed, for v6-active clients through v6-active routers.
func TestV6Resources(t *testing.T) {
	f := newRouteFixture()
	f.acc.NetworkV6 = netV6
	f.acc.Settings.IPv6EnabledGroups = []account.GroupID{"all"}
	for i := range f.peers {
		f.peers[i].IPv6 = netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x77, 15: byte(i + 1)})
		f.peers[i].Meta.IPv6Overlay = f.peers[i].ID == "c1" || f.peers[i].ID == "r1"
	}
	access := Access{Groups: append(routeGroups(), account.Group{ID: "res"}),
		Resources: []account.NetworkResource{
			{ID: "inet", NetworkID: "n", Name: "internet", Type: account.ResourceSubnet, Prefix: netip.MustParsePrefix(anyIPv4), Groups: gs("res"), Enabled: true},
			{ID: "db6", NetworkID: "n", Name: "db6", Type: account.ResourceHost, Prefix: netip.MustParsePrefix("fd99::5/128"), Groups: gs("res"), Enabled: true},
		},
		Routers:  []account.NetworkRouter{{ID: "nr", NetworkID: "n", PeerGroups: gs("routers"), Enabled: true}},
		Policies: []account.Policy{policy("p-res", accept("x", gs("clients", "others"), gs("res"), account.ProtoAll))},
	}
	if d := cmp.Diff([]string{
		"db6:r1 net=db6 dst=fd99::5/128 via=r1 metric=0 masq=false keep=true skip=false",
		"inet:r1 net=internet dst=0.0.0.0/0 via=r1 metric=0 masq=false keep=true skip=false",
		"inet:r1-v6-default net=internet-v6 dst=::/0 via=r1 metric=0 masq=false keep=true skip=false",
		"inet:r2 net=internet dst=0.0.0.0/0 via=r2 metric=0 masq=false keep=true skip=false",
	}, f.view(t, access, "c1").Routes); d != "" {
		t.Errorf("c1 (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{
		"inet:r1 net=internet dst=0.0.0.0/0 via=r1 metric=0 masq=false keep=true skip=false",
		"inet:r2 net=internet dst=0.0.0.0/0 via=r2 metric=0 masq=false keep=true skip=false",
	}, f.view(t, access, "c2").Routes); d != "" {
		t.Errorf("c2 (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{
		"db6:r1 from=[fd00:77::1/128] accept all dst=fd99::5/128 ports=[] ranges=[] policy=p-res",
		"inet:r1 from=[100.70.0.1/32 100.70.0.2/32] accept all dst=0.0.0.0/0 ports=[] ranges=[] policy=p-res",
		"inet:r1-v6-default from=[fd00:77::1/128] accept all dst=::/0 ports=[] ranges=[] policy=p-res",
	}, f.view(t, access, "r1").Rules); d != "" {
		t.Errorf("r1 rules (-want +got):\n%s", d)
	}
	if v := f.view(t, access, "r2"); len(v.Routes) != 1 || len(v.Rules) != 1 {
		t.Errorf("r2: %+v", v)
	}
}

// TestV6Signature: whatever changes what a map shows of the overlay
// changes the signatures of the maps that show it.
func TestV6Signature(t *testing.T) {
	acc, peers, groups := v6Fixture()
	access := Access{Groups: groups, Policies: defaults(acc.ID).Policies}
	base := NewIndex(acc, peers, access)
	sig := func(ix *Index, id account.PeerID) Sig { s, _ := ix.Signature(id); return s }
	// e's agent is upgraded: it now reports the capability.
	up := slices.Clone(peers)
	up[4].Meta.IPv6Overlay = true
	ix := NewIndex(acc, up, access)
	if !ix.IsV6("e") || sig(ix, "a") == sig(base, "a") || sig(ix, "e") == sig(base, "e") {
		t.Error("an upgraded agent changes no signature")
	}
	changes, ok := PeerLocal(base, ix)
	if !ok || len(changes) != 1 || changes[0].ID != "e" || !changes[0].Shown {
		t.Errorf("PeerLocal = %v %t, want e shown", changes, ok)
	}
	// Another v6 network: every map.
	acc2 := acc
	acc2.NetworkV6 = netip.MustParsePrefix("fd00:77::/48")
	if ix := NewIndex(acc2, peers, access); sig(ix, "c") == sig(base, "c") {
		t.Error("a new v6 network leaves c's signature")
	} else if _, ok := PeerLocal(base, ix); ok {
		t.Error("a new v6 network passed as peer-local")
	}
}

// TestV6ResourceLeavesOthers: a v6 network resource changes nothing in
// the map of a peer that is not v6-active (not even which peers it sees,
// as a resource's clients and routers otherwise see each other): its map
// is that of the same state without the resource. Without any v6 network
// this is every peer.
func TestV6ResourceLeavesOthers(t *testing.T) {
	db6 := account.NetworkResource{ID: "db6", NetworkID: "n", Name: "db6", Type: account.ResourceHost, Prefix: netip.MustParsePrefix("fd99::5/128"), Groups: gs("res"), Enabled: true}
	base := Access{Groups: append(routeGroups(), account.Group{ID: "res"}),
		Routers:  []account.NetworkRouter{{ID: "nr", NetworkID: "n", PeerGroups: gs("routers"), Enabled: true}},
		Policies: []account.Policy{policy("p-res", accept("x", gs("clients", "others"), gs("res"), account.ProtoAll))},
	}
	with := base
	with.Resources = []account.NetworkResource{db6}
	for _, tc := range []struct {
		name   string
		v6     bool     // the account has the overlay, c1 and r1 v6-active
		others []string // the peers whose maps must not change
	}{
		{"no v6 network", false, []string{"c1", "c2", "r1", "r2", "tmp"}},
		{"c1 and r1 v6-active", true, []string{"c2", "r2", "tmp"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newRouteFixture()
			if tc.v6 {
				f.acc.NetworkV6 = netV6
				f.acc.Settings.IPv6EnabledGroups = []account.GroupID{"all"}
				for i := range f.peers {
					f.peers[i].IPv6 = netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x77, 15: byte(i + 1)})
					f.peers[i].Meta.IPv6Overlay = f.peers[i].ID == "c1" || f.peers[i].ID == "r1"
				}
			}
			for _, self := range tc.others {
				id := account.PeerID(self)
				if d := cmp.Diff(f.view(t, base, id), f.view(t, with, id)); d != "" {
					t.Errorf("%s: the v6 resource changes its map (-without +with):\n%s", self, d)
				}
				m0, _ := Compute(f.acc, f.peers, base, id)
				m1, _ := Compute(f.acc, f.peers, with, id)
				if !reflect.DeepEqual(m0.Rules, m1.Rules) {
					t.Errorf("%s: firewall rules differ:\n%v\n%v", self, m0.Rules, m1.Rules)
				}
			}
			if !tc.v6 {
				return
			}
			// c1 and r1 see each other for it, and only each other.
			if v := f.view(t, with, "c1"); !reflect.DeepEqual(v.Peers, []account.PeerID{"r1"}) ||
				!reflect.DeepEqual(v.Routes, []string{"db6:r1 net=db6 dst=fd99::5/128 via=r1 metric=0 masq=false keep=true skip=false"}) {
				t.Errorf("c1: %+v", v)
			}
			if v := f.view(t, with, "r1"); !reflect.DeepEqual(v.Peers, []account.PeerID{"c1"}) ||
				!reflect.DeepEqual(v.Rules, []string{"db6:r1 from=[fd00:77::1/128] accept all dst=fd99::5/128 ports=[] ranges=[] policy=p-res"}) {
				t.Errorf("r1: %+v", v)
			}
		})
	}
}
