package grpcapi

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/compactip"
	"github.com/wiremesh/wiremesh/internal/dnszone"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/mapdelta"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// v6Account: a and b are v6-active, c runs an agent with --disable-ipv6,
// d an old agent without the capability; r is a v6-active routing peer
// of an exit node. All-to-all; the All group has the overlay.
func v6Account() (account.Account, []account.Peer, networkmap.Access) {
	acc := account.Account{ID: "acc", Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.70.0.0/16"),
		NetworkV6: netip.MustParsePrefix("fd00:aa::/64"), Serial: 7}
	acc.Settings.IPv6EnabledGroups = []account.GroupID{"all"}
	var ps []account.Peer
	for i, id := range []account.PeerID{"a", "b", "c", "d", "r"} {
		p := account.Peer{ID: id, Key: key.Public{byte(i + 1)}, IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(i + 1)}), DNSLabel: string(id),
			IPv6: netip.AddrFrom16([16]byte{0xfd, 0, 0, 0xaa, 15: byte(i + 1)})}
		p.Meta.IPv6Overlay = id != "d"
		p.Meta.Flags.DisableIPv6 = id == "c"
		ps = append(ps, p)
	}
	all := []account.GroupID{"all"}
	access := networkmap.Access{
		Groups:   []account.Group{{ID: "all", All: true}},
		Policies: []account.Policy{{ID: "p", Enabled: true, Rules: []account.Rule{{ID: "r", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll, Bidirectional: true, Sources: all, Destinations: all}}}},
		Routes:   []account.Route{{ID: "ex", NetID: "exit", Enabled: true, Peer: "r", Network: netip.MustParsePrefix("0.0.0.0/0"), Groups: all, Masquerade: true}},
	}
	return acc, ps, access
}

// wire is self's whole map as a client receives it.
func wire(t *testing.T, ix *networkmap.Index, self account.PeerID, cache remoteCache, derived bool) *mgmtpb.NetworkMap {
	t.Helper()
	m, ok := ix.Compute(self)
	if !ok {
		t.Fatalf("%s not in the state", self)
	}
	r, _ := syncResponse(m, nil, respFor{derivedDNS: derived}, cache)
	b, err := proto.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var got mgmtpb.SyncResponse
	if err := proto.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	return got.NetworkMap
}

// clientFwRule is a FirewallRule as the official client reads it: the
// first source prefix (decoded from its compact form) wins over PeerIP.
type clientFwRule struct {
	Source    netip.Prefix
	PeerIP    string
	Direction mgmtpb.RuleDirection
	Action    mgmtpb.RuleAction
	Protocol  mgmtpb.RuleProtocol
}

func readFwRules(t *testing.T, nm *mgmtpb.NetworkMap) []clientFwRule {
	t.Helper()
	var out []clientFwRule
	for _, r := range nm.GetFirewallRules() {
		if len(r.GetSourcePrefixes()) == 0 {
			t.Fatalf("rule %v without source prefixes", r)
		}
		p, err := compactip.Parse(r.GetSourcePrefixes()[0])
		if err != nil {
			t.Fatalf("rule %v: %v", r, err)
		}
		out = append(out, clientFwRule{p, r.GetPeerIP(), r.GetDirection(), r.GetAction(), r.GetProtocol()})
	}
	return out
}

// TestV6OnTheWire: a v6-active peer's map, decoded as the official client
// reads it, carries its address_v6, the /128 of the v6-active peers only,
// the v6 allow-all twins, the exit node mirrored as ::/0, the v6 routes
// and resources and AAAA records; the peers that are not v6-active get
// the map of the same state without the overlay and without the v6 routes
// and resources, byte for byte.
func TestV6OnTheWire(t *testing.T) {
	acc, ps, access := v6Account()
	// A v6 prefix, as a classic route and as a network resource, both
	// through r: only for v6-active peers.
	all := []account.GroupID{"all"}
	access.Routes = append(access.Routes, account.Route{ID: "l6", NetID: "lan6", Enabled: true, Peer: "r", Network: netip.MustParsePrefix("fd99::/64"), Groups: all})
	access.Groups = append(access.Groups, account.Group{ID: "res6"})
	access.Resources = []account.NetworkResource{{ID: "db6", NetworkID: "n6", Name: "db6", Type: account.ResourceHost, Prefix: netip.MustParsePrefix("fd98::5/128"),
		Groups: []account.GroupID{"res6"}, Enabled: true}}
	access.Routers = []account.NetworkRouter{{ID: "nr6", NetworkID: "n6", Peer: "r", Enabled: true}}
	access.Policies = append(access.Policies, account.Policy{ID: "p6", Enabled: true, Rules: []account.Rule{{ID: "r6", Enabled: true, Action: account.ActionAccept,
		Protocol: account.ProtoAll, Sources: all, Destinations: []account.GroupID{"res6"}}}})
	ix := networkmap.NewIndex(acc, ps, access)
	nm := wire(t, ix, "a", remoteCache{}, false)

	if got, err := compactip.Parse(nm.GetPeerConfig().GetAddressV6()); err != nil || got != netip.MustParsePrefix("fd00:aa::1/64") || len(nm.GetPeerConfig().GetAddressV6()) != 17 {
		t.Errorf("address_v6 = %v (%s, %v)", nm.GetPeerConfig().GetAddressV6(), got, err)
	}
	allowed := map[string][]string{}
	for _, rp := range nm.GetRemotePeers() {
		allowed[strings.TrimSuffix(rp.GetFqdn(), ".netbird.selfhosted")] = rp.GetAllowedIps()
	}
	if d := cmp.Diff(map[string][]string{
		"b": {"100.70.0.2/32", "fd00:aa::2/128"}, "c": {"100.70.0.3/32"}, "d": {"100.70.0.4/32"}, "r": {"100.70.0.5/32", "fd00:aa::5/128"},
	}, allowed); d != "" {
		t.Errorf("allowed IPs (-want +got):\n%s", d)
	}
	any4, any6 := netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")
	acceptAll := func(src netip.Prefix, peerIP string, dir mgmtpb.RuleDirection) clientFwRule {
		return clientFwRule{src, peerIP, dir, mgmtpb.RuleAction_ACCEPT, mgmtpb.RuleProtocol_ALL}
	}
	if d := cmp.Diff([]clientFwRule{
		acceptAll(any4, "0.0.0.0", mgmtpb.RuleDirection_IN), acceptAll(any4, "0.0.0.0", mgmtpb.RuleDirection_OUT),
		acceptAll(any6, "::", mgmtpb.RuleDirection_IN), acceptAll(any6, "::", mgmtpb.RuleDirection_OUT),
	}, readFwRules(t, nm), addrEq, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("firewall rules (-want +got):\n%s", d)
	}
	routes, _ := readRoutes(t, nm)
	var rs []string
	for _, r := range routes {
		rs = append(rs, fmt.Sprintf("%s %s %s type=%d masq=%t", r.ID, r.NetID, r.Network, r.NetworkType, r.Masquerade))
	}
	if d := cmp.Diff([]string{"db6:r db6 fd98::5/128 type=2 masq=false", "ex exit 0.0.0.0/0 type=1 masq=true", "ex-v6-default exit-v6 ::/0 type=2 masq=true",
		"l6 lan6 fd99::/64 type=2 masq=false"}, rs); d != "" {
		t.Errorf("routes (-want +got):\n%s", d)
	}
	var recs []string
	for _, r := range readDNS(t, nm.GetDNSConfig()).Zones[0].Records {
		recs = append(recs, fmt.Sprintf("%s %d %s", r.Name, r.Type, r.RData))
	}
	if d := cmp.Diff([]string{
		"a.netbird.selfhosted 1 100.70.0.1", "a.netbird.selfhosted 28 fd00:aa::1",
		"b.netbird.selfhosted 1 100.70.0.2", "b.netbird.selfhosted 28 fd00:aa::2",
		"c.netbird.selfhosted 1 100.70.0.3", "d.netbird.selfhosted 1 100.70.0.4",
		"r.netbird.selfhosted 1 100.70.0.5", "r.netbird.selfhosted 28 fd00:aa::5",
	}, recs); d != "" {
		t.Errorf("peer zone (-want +got):\n%s", d)
	}
	// The routing peer's rules for the mirror.
	_, rules := readRoutes(t, wire(t, ix, "r", remoteCache{}, false))
	var rr []string
	for _, r := range rules {
		rr = append(rr, fmt.Sprintf("%s %v -> %s", r.RouteID, r.Sources, r.Destination))
	}
	if d := cmp.Diff([]string{"db6:r [fd00:aa::1/128 fd00:aa::2/128] -> fd98::5/128", "ex [0.0.0.0/0] -> 0.0.0.0/0", "ex-v6-default [::/0] -> ::/0",
		"l6 [::/0] -> fd99::/64"}, rr); d != "" {
		t.Errorf("route firewall rules (-want +got):\n%s", d)
	}

	// c and d: exactly the map without the overlay and without the v6
	// route and resource.
	access0 := access
	access0.Routes, access0.Resources = access.Routes[:1], nil
	acc0 := acc
	acc0.NetworkV6, acc0.Settings.IPv6EnabledGroups = netip.Prefix{}, nil
	ps0 := slices.Clone(ps)
	for i := range ps0 {
		ps0[i].IPv6, ps0[i].Meta = netip.Addr{}, account.Meta{}
	}
	ix0 := networkmap.NewIndex(acc0, ps0, access0)
	cache := remoteCache{}
	for i := range ps {
		cache[ps[i].ID] = newShown(&ps[i], acc.Domain, ix.IsV6(ps[i].ID))
	}
	for _, self := range []account.PeerID{"c", "d"} {
		for _, derived := range []bool{false, true} {
			got, want := wire(t, ix, self, cache, derived), wire(t, ix0, self, remoteCache{}, derived)
			gb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(got)
			wb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(want)
			if string(gb) != string(wb) {
				t.Errorf("%s (derived %t): map differs from the one without the overlay:\n%v\n%v", self, derived, got, want)
			}
		}
	}
}

// TestV6FirewallTwins: with a port policy, each rule about a v6-active
// peer has its twin with the peer's v6 address, as a 17-byte /128 source
// prefix, for a v6-active receiver only.
func TestV6FirewallTwins(t *testing.T) {
	acc, ps, access := v6Account()
	access.Policies[0].Rules[0].Protocol, access.Policies[0].Rules[0].Ports = account.ProtoTCP, []uint16{22, 443}
	ix := networkmap.NewIndex(acc, ps, access)
	count := func(nm *mgmtpb.NetworkMap) (v4, v6 int) {
		for _, r := range nm.GetFirewallRules() {
			switch sp := r.GetSourcePrefixes()[0]; len(sp) {
			case 5:
				v4++
			case 17:
				v6++
				if p, _ := compactip.Parse(sp); p.Bits() != 128 || p.Addr().String() != r.GetPeerIP() {
					t.Errorf("v6 rule %v: prefix %s", r, p)
				}
			}
		}
		return v4, v6
	}
	// a: 4 peers x 2 directions x 2 ports, and twins for b and r.
	if v4, v6 := count(wire(t, ix, "a", remoteCache{}, false)); v4 != 16 || v6 != 8 {
		t.Errorf("a: %d v4 and %d v6 rules, want 16 and 8", v4, v6)
	}
	if v4, v6 := count(wire(t, ix, "d", remoteCache{}, false)); v4 != 16 || v6 != 0 {
		t.Errorf("d: %d v4 and %d v6 rules, want 16 and 0", v4, v6)
	}
}

// normalized is a map as a client uses it, order aside: remote peers by
// key, firewall rules as a sorted multiset, the derived zone filled in.
func normalized(nm *mgmtpb.NetworkMap) *mgmtpb.NetworkMap {
	nm = proto.Clone(nm).(*mgmtpb.NetworkMap)
	dnszone.Fill(nm)
	for _, z := range nm.GetDNSConfig().GetCustomZones() {
		z.WiremeshDerivedRecords = false
	}
	slices.SortFunc(nm.RemotePeers, func(a, b *mgmtpb.RemotePeerConfig) int { return strings.Compare(a.GetWgPubKey(), b.GetWgPubKey()) })
	key := func(r *mgmtpb.FirewallRule) string {
		b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(r)
		return string(b)
	}
	slices.SortFunc(nm.FirewallRules, func(a, b *mgmtpb.FirewallRule) int { return strings.Compare(key(a), key(b)) })
	return nm
}

// TestV6DeltaMatchesWholeMaps: on random accounts with v6-active peers,
// old agents and --disable-ipv6 ones, every peer-local change (a peer
// joins, leaves, is renamed, upgrades its agent or turns IPv6 off or on)
// sent as a delta and applied by our agent (internal/mapdelta, its zone
// rebuilt by internal/dnszone) gives exactly the whole map the server
// would send, allowed IPs, rules and AAAA records included.
func TestV6DeltaMatchesWholeMaps(t *testing.T) {
	deltas := 0
	for seed := range uint64(150) {
		rng := rand.New(rand.NewPCG(seed, 6))
		acc := account.Account{ID: "acc", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"),
			NetworkV6: netip.MustParsePrefix("fd00:70::/64"), Serial: 1}
		acc.Settings.IPv6EnabledGroups = []account.GroupID{[]account.GroupID{"all", "g0"}[rng.IntN(2)]}
		mk := func(i int, name string) account.Peer {
			p := account.Peer{ID: account.PeerID(name), Key: key.Public{byte(i + 1)}, IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(10 + i)}),
				DNSLabel: name, Name: name, IPv6: netip.AddrFrom16([16]byte{0xfd, 0, 0, 0x70, 15: byte(10 + i)})}
			p.Meta.IPv6Overlay = rng.IntN(3) > 0
			p.Meta.Flags.DisableIPv6 = rng.IntN(5) == 0
			return p
		}
		n := 3 + rng.IntN(8)
		var peers []account.Peer
		for i := range n {
			peers = append(peers, mk(i, fmt.Sprintf("p%02d", i)))
		}
		groups := []account.Group{{ID: "all", All: true}}
		for g := range 2 {
			grp := account.Group{ID: account.GroupID(fmt.Sprintf("g%d", g))}
			for _, p := range peers {
				if rng.IntN(2) == 0 {
					grp.Peers = append(grp.Peers, p.ID)
				}
			}
			groups = append(groups, grp)
		}
		var policies []account.Policy
		if rng.IntN(3) == 0 {
			all := []account.GroupID{"all"}
			policies = append(policies, account.Policy{ID: "aa", Enabled: true, Rules: []account.Rule{{ID: "aa", Enabled: true, Action: account.ActionAccept,
				Protocol: account.ProtoAll, Bidirectional: true, Sources: all, Destinations: all}}})
		}
		for p := range 1 + rng.IntN(3) {
			gid := func() account.GroupID { return groups[rng.IntN(len(groups))].ID }
			r := account.Rule{ID: "r", Enabled: true, Action: []string{account.ActionAccept, account.ActionDrop}[rng.IntN(4)/3],
				Protocol: []string{account.ProtoAll, account.ProtoTCP}[rng.IntN(2)], Bidirectional: rng.IntN(2) == 0,
				Sources: []account.GroupID{gid()}, Destinations: []account.GroupID{gid()}}
			if r.Protocol == account.ProtoTCP {
				r.Ports = []uint16{uint16(20 + rng.IntN(3))}
			}
			policies = append(policies, account.Policy{ID: account.PolicyID(fmt.Sprintf("pol%d", p)), Enabled: true, Rules: []account.Rule{r}})
		}
		// Routes and network resources: a v4 exit node and a v6 prefix,
		// classic and as resources, served by random groups.
		groups = append(groups, account.Group{ID: "res"}, account.Group{ID: "res6"})
		gid := func() []account.GroupID { return []account.GroupID{groups[rng.IntN(len(groups)-2)].ID} }
		for _, res := range []account.GroupID{"res", "res6"} {
			policies = append(policies, account.Policy{ID: account.PolicyID("p" + res), Enabled: true, Rules: []account.Rule{{ID: "r" + string(res), Enabled: true,
				Action: account.ActionAccept, Protocol: account.ProtoAll, Sources: gid(), Destinations: []account.GroupID{res}}}})
		}
		routes := []account.Route{
			{ID: "ex", NetID: "exit", Enabled: true, PeerGroups: gid(), Network: netip.MustParsePrefix("0.0.0.0/0"), Groups: gid()},
			{ID: "l6", NetID: "lan6", Enabled: true, PeerGroups: gid(), Network: netip.MustParsePrefix("fd99::/64"), Groups: gid()},
		}
		resources := []account.NetworkResource{
			{ID: "inet", NetworkID: "n", Name: "inet", Type: account.ResourceSubnet, Prefix: netip.MustParsePrefix("0.0.0.0/0"), Groups: []account.GroupID{"res"}, Enabled: true},
			{ID: "db6", NetworkID: "n6", Name: "db6", Type: account.ResourceHost, Prefix: netip.MustParsePrefix("fd99::5/128"), Groups: []account.GroupID{"res6"}, Enabled: true},
		}
		routers := []account.NetworkRouter{{ID: "nr", NetworkID: "n", PeerGroups: gid(), Enabled: true}, {ID: "nr6", NetworkID: "n6", PeerGroups: gid(), Enabled: true}}
		access := func(groups []account.Group) networkmap.Access {
			return networkmap.Access{Groups: groups, Policies: policies, Routes: routes, Resources: resources, Routers: routers}
		}
		old := networkmap.NewIndex(acc, peers, access(groups))

		acc2 := acc
		acc2.Serial = 2
		peers2 := slices.Clone(peers)
		groups2 := slices.Clone(groups)
		for i := range groups2 {
			groups2[i].Peers = slices.Clone(groups[i].Peers)
		}
		k := rng.IntN(len(peers2))
		switch rng.IntN(5) {
		case 0:
			np := mk(n, "new")
			peers2 = append(peers2, np)
			for i := 1; i < len(groups2); i++ {
				if rng.IntN(2) == 0 {
					groups2[i].Peers = append(groups2[i].Peers, np.ID)
				}
			}
		case 1:
			gone := peers2[k].ID
			peers2 = slices.Delete(peers2, k, k+1)
			for i := range groups2 {
				groups2[i].Peers = slices.DeleteFunc(groups2[i].Peers, func(id account.PeerID) bool { return id == gone })
			}
		case 2:
			peers2[k].DNSLabel, peers2[k].Name = "renamed", "renamed"
		case 3:
			peers2[k].Meta.IPv6Overlay = !peers2[k].Meta.IPv6Overlay
		case 4:
			peers2[k].Meta.Flags.DisableIPv6 = !peers2[k].Meta.Flags.DisableIPv6
		}
		cur := networkmap.NewIndex(acc2, peers2, access(groups2))
		changes, ok := networkmap.PeerLocal(old, cur)
		if !ok {
			t.Fatalf("seed %d: a peer-local change refused", seed)
		}
		cache := remoteCache{}
		for i := range peers2 {
			cache[peers2[i].ID] = newShown(&peers2[i], acc2.Domain, cur.IsV6(peers2[i].ID))
		}
		for _, self := range peers2 {
			if !old.Has(self.ID) {
				continue
			}
			for _, derived := range []bool{false, true} {
				before := wire(t, old, self.ID, remoteCache{}, derived)
				want := normalized(wire(t, cur, self.ID, cache, derived))
				d, ok := mapDelta(old, cur, cache, self.ID, changes)
				if !ok {
					continue // a whole map goes
				}
				var st mapdelta.State
				if _, err := st.Update(&mgmtpb.SyncResponse{NetworkMap: before}); err != nil {
					t.Fatal(err)
				}
				got := before
				if d != nil {
					deltas++
					d.BaseSerial, d.Serial = before.GetSerial(), acc2.Serial
					r, err := st.Update(&mgmtpb.SyncResponse{WiremeshDelta: d})
					if err != nil {
						t.Fatal(err)
					}
					got = r.GetNetworkMap()
				}
				got = normalized(got)
				got.Serial = want.Serial
				if !proto.Equal(got, want) {
					t.Fatalf("seed %d, peer %s (derived %t): delta gives\n%v\nwant\n%v", seed, self.ID, derived, got, want)
				}
			}
		}
	}
	if deltas < 100 {
		t.Fatalf("only %d deltas sent: the test checks too little", deltas)
	}
}
