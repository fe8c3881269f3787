package grpcapi

import (
	"hash/maphash"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/dnszone"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/mapdelta"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// clientNS, clientZone and clientDNS are a DNSConfig as the official
// client (v0.77.1) reads it: nameserver IPs parsed (MustParseAddr: a bad
// one would crash it), a zone non-authoritative only when the server says
// so and it is not the only zone.
type clientNS struct {
	IP     netip.Addr
	NSType int64
	Port   int64
}

type clientNSGroup struct {
	NS            []clientNS
	Primary       bool
	Domains       []string
	SearchDomains bool
}

type clientRecord struct {
	Name  string
	Type  int64
	Class string
	TTL   int64
	RData string
}

type clientZone struct {
	Domain           string
	Records          []clientRecord
	SearchDisabled   bool
	NonAuthoritative bool
}

type clientDNS struct {
	Enabled bool
	Groups  []clientNSGroup
	Zones   []clientZone
}

// addrEq compares addresses by value for cmp.
var addrEq = cmp.Comparer(func(a, b netip.Addr) bool { return a == b })

func readDNS(t *testing.T, dc *mgmtpb.DNSConfig) clientDNS {
	t.Helper()
	out := clientDNS{Enabled: dc.GetServiceEnable()}
	single := len(dc.GetCustomZones()) == 1
	for _, z := range dc.GetCustomZones() {
		cz := clientZone{Domain: z.GetDomain(), SearchDisabled: z.GetSearchDomainDisabled(), NonAuthoritative: z.GetNonAuthoritative() && !single}
		for _, r := range z.GetRecords() {
			cz.Records = append(cz.Records, clientRecord{r.GetName(), r.GetType(), r.GetClass(), r.GetTTL(), r.GetRData()})
		}
		out.Zones = append(out.Zones, cz)
	}
	for _, g := range dc.GetNameServerGroups() {
		cg := clientNSGroup{Primary: g.GetPrimary(), Domains: g.GetDomains(), SearchDomains: g.GetSearchDomainsEnabled()}
		for _, ns := range g.GetNameServers() {
			ip, err := netip.ParseAddr(ns.GetIP())
			if err != nil {
				t.Fatalf("nameserver IP %q would crash the official client: %v", ns.GetIP(), err)
			}
			cg.NS = append(cg.NS, clientNS{ip, ns.GetNSType(), ns.GetPort()})
		}
		out.Groups = append(out.Groups, cg)
	}
	return out
}

// dnsAccount: peers a (group devs), b (group ops), c (group quiet, whose
// DNS is unmanaged), all-to-all, with a split and a primary nameserver
// group and two zones.
func dnsAccount() (account.Account, []account.Peer, networkmap.Access) {
	acc := account.Account{ID: "a", Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 3}
	var ps []account.Peer
	for i, id := range []account.PeerID{"a", "b", "c"} {
		ps = append(ps, account.Peer{ID: id, Key: key.Public{byte(i + 1)}, IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(i + 1)}), DNSLabel: string(id)})
	}
	gs := func(ids ...account.GroupID) []account.GroupID { return ids }
	access := networkmap.Access{
		Groups: []account.Group{{ID: "all", All: true}, {ID: "devs", Peers: []account.PeerID{"a"}}, {ID: "ops", Peers: []account.PeerID{"b"}},
			{ID: "quiet", Peers: []account.PeerID{"c"}}},
		Policies: []account.Policy{{ID: "p", Enabled: true, Rules: []account.Rule{{ID: "r", Enabled: true, Action: account.ActionAccept,
			Protocol: account.ProtoAll, Bidirectional: true, Sources: gs("all"), Destinations: gs("all")}}}},
		NameserverGroups: []account.NameserverGroup{
			{ID: "split", Name: "corp", Enabled: true, Groups: gs("devs"), Domains: []string{"corp.example", "xn--bcher-kva.example"}, SearchDomainsEnabled: true,
				Nameservers: []account.Nameserver{{IP: netip.MustParseAddr("10.0.0.53"), NSType: "udp", Port: 53}, {IP: netip.MustParseAddr("2001:db8::53"), NSType: "udp", Port: 5353}}},
			{ID: "prim", Name: "google", Enabled: true, Groups: gs("all"), Primary: true,
				Nameservers: []account.Nameserver{{IP: netip.MustParseAddr("8.8.8.8"), NSType: "udp", Port: 53}}},
		},
		DNSSettings: account.DNSSettings{DisabledManagementGroups: gs("quiet")},
		Zones: []account.Zone{
			{ID: "z1", Domain: "Lab.Example", EnableSearchDomain: true, Enabled: true, DistributionGroups: gs("ops"), Records: []account.Record{
				{ID: "r1", Name: "www.lab.example", Type: account.RecordA, Content: "10.1.0.1", TTL: 60},
				{ID: "r2", Name: "v6.lab.example", Type: account.RecordAAAA, Content: "2001:db8::1", TTL: 120},
				{ID: "r3", Name: "alias.lab.example", Type: account.RecordCNAME, Content: "www.lab.example", TTL: 300},
			}},
			{ID: "z2", Domain: "shop.example", Enabled: true, DistributionGroups: gs("all"), Records: []account.Record{
				{ID: "r4", Name: "shop.example", Type: account.RecordA, Content: "10.1.0.2", TTL: 300},
			}},
		},
	}
	return acc, ps, access
}

// TestDNSOnTheWire: each peer's DNSConfig, decoded as the official client
// reads it, holds the peer zone (authoritative, the peers' names), then
// its custom zones in NetBird's form, then its nameserver groups; a peer
// whose DNS is unmanaged gets ServiceEnable off and nothing else.
func TestDNSOnTheWire(t *testing.T) {
	acc, ps, access := dnsAccount()
	ix := networkmap.NewIndex(acc, ps, access)
	peerZone := clientZone{Domain: "netbird.selfhosted.", Records: []clientRecord{
		{"a.netbird.selfhosted", 1, "IN", 300, "100.70.0.1"}, {"b.netbird.selfhosted", 1, "IN", 300, "100.70.0.2"}, {"c.netbird.selfhosted", 1, "IN", 300, "100.70.0.3"}}}
	rotate := func(z clientZone, self int) clientZone { // itself first, then the others by address
		z.Records = append([]clientRecord{z.Records[self]}, append(append([]clientRecord{}, z.Records[:self]...), z.Records[self+1:]...)...)
		return z
	}
	shop := clientZone{Domain: "shop.example.", Records: []clientRecord{{"shop.example.", 1, "IN", 300, "10.1.0.2"}}, SearchDisabled: true, NonAuthoritative: true}
	lab := clientZone{Domain: "lab.example.", NonAuthoritative: true, Records: []clientRecord{
		{"www.lab.example.", 1, "IN", 60, "10.1.0.1"}, {"v6.lab.example.", 28, "IN", 120, "2001:db8::1"}, {"alias.lab.example.", 5, "IN", 300, "www.lab.example."}}}
	prim := clientNSGroup{Primary: true, NS: []clientNS{{netip.MustParseAddr("8.8.8.8"), 1, 53}}}
	split := clientNSGroup{Domains: []string{"corp.example", "xn--bcher-kva.example"}, SearchDomains: true,
		NS: []clientNS{{netip.MustParseAddr("10.0.0.53"), 1, 53}, {netip.MustParseAddr("2001:db8::53"), 1, 5353}}}
	wants := map[account.PeerID]clientDNS{
		"a": {Enabled: true, Zones: []clientZone{rotate(peerZone, 0), shop}, Groups: []clientNSGroup{split, prim}},
		"b": {Enabled: true, Zones: []clientZone{rotate(peerZone, 1), lab, shop}, Groups: []clientNSGroup{prim}},
		"c": {},
	}
	for id, want := range wants {
		m, _ := ix.Compute(id)
		r, b := syncResponse(m, nil, respFor{}, remoteCache{})
		// Through the hand-assembled encoding, as streams send it.
		plain, _ := encodeMap(maphash.MakeSeed(), r, b)
		var got mgmtpb.SyncResponse
		if err := proto.Unmarshal(plain, &got); err != nil {
			t.Fatal(err)
		}
		if !proto.Equal(&got, r) {
			t.Fatalf("%s: encoded map decodes to %v\nwant %v", id, &got, r)
		}
		if d := cmp.Diff(want, readDNS(t, got.GetNetworkMap().GetDNSConfig()), addrEq); d != "" {
			t.Errorf("%s (-want +got):\n%s", id, d)
		}
	}
}

// TestDNSDerived: for our agents (derived peer records) the account's
// zones and nameservers come as for official clients, and filling in the
// peer zone leaves them alone.
func TestDNSDerived(t *testing.T) {
	acc, ps, access := dnsAccount()
	ix := networkmap.NewIndex(acc, ps, access)
	m, _ := ix.Compute("b")
	full, _ := syncResponse(m, nil, respFor{}, remoteCache{})
	r, b := syncResponse(m, nil, respFor{derivedDNS: true}, remoteCache{})
	plain, _ := encodeMap(maphash.MakeSeed(), r, b)
	var got mgmtpb.SyncResponse
	if err := proto.Unmarshal(plain, &got); err != nil {
		t.Fatal(err)
	}
	if n := len(got.NetworkMap.DNSConfig.CustomZones[0].Records); n != 0 {
		t.Fatalf("derived peer zone carries %d records", n)
	}
	dnszone.Fill(got.NetworkMap)
	got.NetworkMap.DNSConfig.CustomZones[0].WiremeshDerivedRecords = false
	if d := cmp.Diff(readDNS(t, full.NetworkMap.DNSConfig), readDNS(t, got.NetworkMap.DNSConfig), addrEq); d != "" {
		t.Errorf("derived and filled (-full +derived):\n%s", d)
	}
	// A delta (a new peer) keeps the zones and nameservers of the map.
	var st mapdelta.State
	if _, err := st.Update(&got); err != nil {
		t.Fatal(err)
	}
	next, err := st.Update(&mgmtpb.SyncResponse{WiremeshDelta: &mgmtpb.NetworkMapDelta{BaseSerial: got.NetworkMap.Serial, Serial: got.NetworkMap.Serial + 1,
		UpsertPeers: []*mgmtpb.RemotePeerConfig{{WgPubKey: key.Public{9}.String(), AllowedIps: []string{"100.70.0.9/32"}, Fqdn: "new.netbird.selfhosted"}}}})
	if err != nil {
		t.Fatal(err)
	}
	dc := readDNS(t, next.GetNetworkMap().GetDNSConfig())
	if len(dc.Zones) != 3 || len(dc.Zones[0].Records) != 4 || len(dc.Groups) != 1 || !cmp.Equal(dc.Zones[1:], readDNS(t, full.NetworkMap.DNSConfig).Zones[1:], addrEq) {
		t.Errorf("after a delta: %+v", dc)
	}
}

// TestDNSNoPeerZone: without a peer domain the account's DNS still goes
// out (ServiceEnable on); a lone custom zone is then authoritative for
// the official client, as with the reference server.
func TestDNSNoPeerZone(t *testing.T) {
	acc, ps, access := dnsAccount()
	acc.Domain = ""
	m, _ := networkmap.NewIndex(acc, ps, access).Compute("a")
	r, _ := syncResponse(m, nil, respFor{}, remoteCache{})
	dc := readDNS(t, r.NetworkMap.DNSConfig)
	if !dc.Enabled || len(dc.Zones) != 1 || dc.Zones[0].Domain != "shop.example." || len(dc.Groups) != 2 {
		t.Errorf("%+v", dc)
	}
}

// TestDNSEncodingSkipsUnusable: a nameserver the official client could not
// use (no address, another protocol) is left out, and a group left without
// any with it; a port of 0 means 53; a record of an unknown type is left
// out, and a zone left without any with it.
func TestDNSEncodingSkipsUnusable(t *testing.T) {
	gs := nameserverGroups([]*account.NameserverGroup{
		{ID: "x", Nameservers: []account.Nameserver{{NSType: "udp", Port: 53}, {IP: netip.MustParseAddr("10.0.0.1"), NSType: "tcp", Port: 53}}},
		{ID: "y", Nameservers: []account.Nameserver{{IP: netip.MustParseAddr("::ffff:10.0.0.2"), NSType: "udp"}}},
	})
	if len(gs) != 1 || gs[0].NameServers[0].IP != "10.0.0.2" || gs[0].NameServers[0].Port != 53 || gs[0].NameServers[0].NSType != 1 {
		t.Errorf("groups: %v", gs)
	}
	zs := customZones([]*account.Zone{
		{ID: "z", Domain: "a.example", Records: []account.Record{{Name: "a.example", Type: "MX", Content: "x"}}},
		{ID: "w", Domain: "b.example", Records: []account.Record{{Name: "b.example", Type: "TXT", Content: "x"}, {Name: "b.example", Type: account.RecordA, Content: "10.0.0.1", TTL: 5}}},
	})
	if len(zs) != 1 || zs[0].Domain != "b.example." || len(zs[0].Records) != 1 {
		t.Errorf("zones: %v", zs)
	}
}

// TestDNSDelta: after a DNS change, exactly the peers whose DNS changed
// need a whole map; every other stream is sent nothing.
func TestDNSDelta(t *testing.T) {
	acc, ps, access := dnsAccount()
	old := networkmap.NewIndex(acc, ps, access)
	acc.Serial++
	access.NameserverGroups[0].Domains = append(access.NameserverGroups[0].Domains, "new.example") // devs: a
	access.Zones[0].Records[0].Content = "10.1.0.9"                                                // ops: b
	cur := networkmap.NewIndex(acc, ps, access)
	changes, ok := networkmap.PeerLocal(old, cur)
	if !ok {
		t.Fatal("refused")
	}
	for _, tc := range []struct {
		self  account.PeerID
		whole bool
	}{{"a", true}, {"b", true}, {"c", false}} {
		d, ok := mapDelta(old, cur, remoteCache{}, tc.self, changes)
		if ok == tc.whole || (ok && d != nil) {
			t.Errorf("%s: delta %v ok=%t, want whole map=%t", tc.self, d, ok, tc.whole)
		}
	}
}

// TestDNSPeerZoneReachable: the peer zone names only the peers the policy
// lets the receiving peer reach (and itself), for official clients and for
// our agents alike: a name of any other peer does not resolve (NXDOMAIN).
func TestDNSPeerZoneReachable(t *testing.T) {
	acc, ps, access := dnsAccount()
	access.NameserverGroups, access.Zones, access.DNSSettings = nil, nil, account.DNSSettings{}
	// Only a -> b.
	access.Policies[0].Rules[0].Sources, access.Policies[0].Rules[0].Destinations = []account.GroupID{"devs"}, []account.GroupID{"ops"}
	ix := networkmap.NewIndex(acc, ps, access)
	for self, want := range map[account.PeerID][]string{
		"a": {"a.netbird.selfhosted", "b.netbird.selfhosted"},
		"b": {"b.netbird.selfhosted", "a.netbird.selfhosted"},
		"c": {"c.netbird.selfhosted"},
	} {
		m, _ := ix.Compute(self)
		for _, derived := range []bool{false, true} {
			r, _ := syncResponse(m, nil, respFor{derivedDNS: derived}, remoteCache{})
			dnszone.Fill(r.NetworkMap)
			var got []string
			for _, rec := range readDNS(t, r.NetworkMap.DNSConfig).Zones[0].Records {
				got = append(got, rec.Name)
			}
			if d := cmp.Diff(want, got); d != "" {
				t.Errorf("%s (derived %t) peer zone (-want +got):\n%s", self, derived, d)
			}
		}
	}
}
