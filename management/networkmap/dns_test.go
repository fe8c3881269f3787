package networkmap

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/wiremesh/wiremesh/management/account"
)

// dnsFixture: c1 (clients), c2 (others), r1 (routers, and a nameserver's
// address), pend (clients, pending approval), tmp (temporary, in
// others), all under the default allow-all policy.
func dnsFixture() (account.Account, []account.Peer, Access) {
	f := newRouteFixture()
	groups := routeGroups()
	for i := range groups {
		if groups[i].ID == "others" {
			groups[i].Peers = append(groups[i].Peers, "tmp")
		}
	}
	access := defaults(f.acc.ID)
	access.Groups = groups
	return f.acc, f.peers, access
}

func ns(ip string) account.Nameserver {
	return account.Nameserver{IP: netip.MustParseAddr(ip), NSType: "udp", Port: 53}
}

func nsGroup(id account.NameserverGroupID, groups []account.GroupID, domains ...string) account.NameserverGroup {
	return account.NameserverGroup{ID: id, Name: string(id), Enabled: true, Groups: groups, Nameservers: []account.Nameserver{ns("10.9.0.53")},
		Domains: domains, Primary: len(domains) == 0}
}

func zone(id account.ZoneID, domain string, groups []account.GroupID) account.Zone {
	return account.Zone{ID: id, Domain: domain, Enabled: true, DistributionGroups: groups,
		Records: []account.Record{{ID: account.RecordID(id + "-r"), ZoneID: id, Name: "www." + domain, Type: account.RecordA, Content: "10.9.0.80", TTL: 60}}}
}

// dnsSummary is a peer's DNS as IDs.
type dnsSummary struct {
	Managed bool
	NS      []account.NameserverGroupID
	Zones   []account.ZoneID
}

func summarizeDNS(d DNS) dnsSummary {
	s := dnsSummary{Managed: d.Managed}
	for _, g := range d.NameserverGroups {
		s.NS = append(s.NS, g.ID)
	}
	for _, z := range d.Zones {
		s.Zones = append(s.Zones, z.ID)
	}
	return s
}

func TestDNSPerPeer(t *testing.T) {
	managed := dnsSummary{Managed: true}
	tests := []struct {
		name  string
		edit  func(*Access)
		wants map[account.PeerID]dnsSummary
	}{
		{"nothing configured", func(*Access) {}, map[account.PeerID]dnsSummary{"c1": managed, "c2": managed, "pend": managed, "tmp": managed}},
		{
			"distribution groups", func(a *Access) {
				a.NameserverGroups = []account.NameserverGroup{nsGroup("corp", gs("clients"), "corp.example"), nsGroup("prim", gs("all"))}
				a.Zones = []account.Zone{zone("z-others", "others.example", gs("others")), zone("z-all", "all.example", gs("all"))}
			},
			map[account.PeerID]dnsSummary{
				"c1":   {Managed: true, NS: []account.NameserverGroupID{"corp", "prim"}, Zones: []account.ZoneID{"z-others", "z-all"}[1:]},
				"c2":   {Managed: true, NS: []account.NameserverGroupID{"prim"}, Zones: []account.ZoneID{"z-others", "z-all"}},
				"r1":   {Managed: true, NS: []account.NameserverGroupID{"prim"}, Zones: []account.ZoneID{"z-all"}},
				"pend": managed,                                              // in no group while pending
				"tmp":  {Managed: true, Zones: []account.ZoneID{"z-others"}}, // not in All, only in what names it
			},
		},
		{
			"disabled management group", func(a *Access) {
				a.NameserverGroups = []account.NameserverGroup{nsGroup("prim", gs("all"))}
				a.Zones = []account.Zone{zone("z", "z.example", gs("all"))}
				a.DNSSettings.DisabledManagementGroups = gs("routers", "acg")
			},
			map[account.PeerID]dnsSummary{
				"c1": {Managed: true, NS: []account.NameserverGroupID{"prim"}, Zones: []account.ZoneID{"z"}},
				"r1": {}, "r2": {}, // nothing at all
			},
		},
		{
			"disabled group and zone, no records, no nameservers", func(a *Access) {
				off := nsGroup("off", gs("all"))
				off.Enabled = false
				none := nsGroup("none", gs("all"))
				none.Nameservers = nil
				zoff := zone("zoff", "off.example", gs("all"))
				zoff.Enabled = false
				empty := zone("empty", "empty.example", gs("all"))
				empty.Records = nil
				a.NameserverGroups = []account.NameserverGroup{off, none, nsGroup("on", gs("all"), "x.example")}
				a.Zones = []account.Zone{zoff, empty, zone("zon", "on.example", gs("all"))}
			},
			map[account.PeerID]dnsSummary{"c1": {Managed: true, NS: []account.NameserverGroupID{"on"}, Zones: []account.ZoneID{"zon"}}},
		},
		{
			"a peer that is one of the nameservers does not ask itself", func(a *Access) {
				self := nsGroup("self", gs("all"))
				self.Nameservers = append(self.Nameservers, ns("100.70.0.3")) // r1
				a.NameserverGroups = []account.NameserverGroup{self}
			},
			map[account.PeerID]dnsSummary{"c1": {Managed: true, NS: []account.NameserverGroupID{"self"}}, "r1": managed},
		},
		{
			"account order kept", func(a *Access) {
				a.NameserverGroups = []account.NameserverGroup{nsGroup("b", gs("all")), nsGroup("a", gs("all"), "a.example")}
			},
			map[account.PeerID]dnsSummary{"c2": {Managed: true, NS: []account.NameserverGroupID{"b", "a"}}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			acc, peers, access := dnsFixture()
			tc.edit(&access)
			ix := NewIndex(acc, peers, access)
			for id, want := range tc.wants {
				m, ok := ix.Compute(id)
				if !ok {
					t.Fatalf("%s: no map", id)
				}
				if d := cmp.Diff(want, summarizeDNS(m.DNS)); d != "" {
					t.Errorf("%s (-want +got):\n%s", id, d)
				}
			}
		})
	}
}

// TestDNSCarriesConfig: a map's groups and zones are the account's, as
// stored (primary vs split, search domains, records).
func TestDNSCarriesConfig(t *testing.T) {
	acc, peers, access := dnsFixture()
	split := nsGroup("split", gs("all"), "corp.example", "lab.example")
	split.SearchDomainsEnabled = true
	split.Nameservers = []account.Nameserver{ns("10.9.0.53"), {IP: netip.MustParseAddr("10.9.0.54"), NSType: "udp", Port: 5353}}
	z := zone("z", "z.example", gs("all"))
	z.EnableSearchDomain = true
	z.Records = append(z.Records, account.Record{ID: "c", ZoneID: "z", Name: "alias.z.example", Type: account.RecordCNAME, Content: "www.z.example", TTL: 300})
	access.NameserverGroups = []account.NameserverGroup{split, nsGroup("prim", gs("all"))}
	access.Zones = []account.Zone{z}
	m, _ := Compute(acc, peers, access, "c1")
	got := []account.NameserverGroup{*m.DNS.NameserverGroups[0], *m.DNS.NameserverGroups[1]}
	if d := cmp.Diff(access.NameserverGroups, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Errorf("groups (-want +got):\n%s", d)
	}
	if !got[1].Primary || got[0].Primary {
		t.Error("primary flag lost")
	}
	if d := cmp.Diff(z, *m.DNS.Zones[0]); d != "" {
		t.Errorf("zone (-want +got):\n%s", d)
	}
}

// TestDNSSignature: exactly the peers whose DNS changes get a new
// signature, for each kind of DNS change.
func TestDNSSignature(t *testing.T) {
	base := func(a *Access) {
		a.NameserverGroups = []account.NameserverGroup{nsGroup("corp", gs("clients"), "corp.example"), nsGroup("prim", gs("routers"))}
		a.Zones = []account.Zone{zone("z", "z.example", gs("others"))}
	}
	tests := []struct {
		name    string
		edit    func(*Access)
		changed []account.PeerID
	}{
		{"no change", func(*Access) {}, nil},
		{"nameserver address", func(a *Access) { a.NameserverGroups[0].Nameservers[0].Port = 5353 }, []account.PeerID{"c1"}},
		{"match domain", func(a *Access) { a.NameserverGroups[1].Domains = []string{"x.example"} }, []account.PeerID{"r1", "r2"}},
		{"search domains", func(a *Access) { a.NameserverGroups[0].SearchDomainsEnabled = true }, []account.PeerID{"c1"}},
		{"group disabled", func(a *Access) { a.NameserverGroups[1].Enabled = false }, []account.PeerID{"r1", "r2"}},
		{"distribution groups", func(a *Access) { a.NameserverGroups[0].Groups = gs("others") }, []account.PeerID{"c1", "c2", "tmp"}},
		{"order", func(a *Access) { slices.Reverse(a.NameserverGroups); a.NameserverGroups[0].Groups = gs("clients") },
			[]account.PeerID{"c1", "r1", "r2"}},
		{"record", func(a *Access) { a.Zones[0].Records[0].Content = "10.9.0.81" }, []account.PeerID{"c2", "tmp"}},
		{"zone search domain", func(a *Access) { a.Zones[0].EnableSearchDomain = true }, []account.PeerID{"c2", "tmp"}},
		{"new zone", func(a *Access) { a.Zones = append(a.Zones, zone("z2", "b.example", gs("routers"))) }, []account.PeerID{"r1", "r2"}},
		{"disabled management", func(a *Access) { a.DNSSettings.DisabledManagementGroups = gs("clients") }, []account.PeerID{"c1"}},
		{"member joins", func(a *Access) { a.Groups[1].Peers = append(a.Groups[1].Peers, "r1") }, []account.PeerID{"r1"}},
	}
	acc, peers, access := dnsFixture()
	base(&access)
	old := NewIndex(acc, peers, access)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			acc, peers, access := dnsFixture()
			base(&access)
			tc.edit(&access)
			cur := NewIndex(acc, peers, access)
			var got []account.PeerID
			for _, p := range peers {
				a, _ := old.Signature(p.ID)
				b, _ := cur.Signature(p.ID)
				if a != b {
					got = append(got, p.ID)
				}
				ma, _ := old.Compute(p.ID)
				mb, _ := cur.Compute(p.ID)
				if same := cmp.Equal(summarizeDNS(ma.DNS), summarizeDNS(mb.DNS)) && cmp.Equal(ma.DNS, mb.DNS, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); same == (a != b) {
					t.Errorf("%s: maps equal=%t but signatures equal=%t", p.ID, same, a == b)
				}
			}
			if d := cmp.Diff(tc.changed, got); d != "" {
				t.Errorf("changed (-want +got):\n%s", d)
			}
		})
	}
}

// TestDNSPeerLocal: a DNS change is peer-local: the peers whose DNS
// changed are listed (not shown differently), so they get their whole
// map and nobody else gets anything.
func TestDNSPeerLocal(t *testing.T) {
	acc, peers, access := dnsFixture()
	old := NewIndex(acc, peers, access)
	access.NameserverGroups = []account.NameserverGroup{nsGroup("corp", gs("clients"), "corp.example")}
	// A group no rule names: without DNS nothing would notice it.
	access.Groups = append(access.Groups, account.Group{ID: "dnsonly", Peers: []account.PeerID{"c2"}})
	access.Zones = []account.Zone{zone("z", "z.example", gs("dnsonly"))}
	acc.Serial++
	cur := NewIndex(acc, peers, access)
	changes, ok := PeerLocal(old, cur)
	if !ok {
		t.Fatal("a DNS change was refused as broad")
	}
	var got []account.PeerID
	for _, c := range changes {
		got = append(got, c.ID)
		if c.Shown || c.Old == nil || c.New == nil {
			t.Errorf("%s: %+v, want a change of its own map only", c.ID, c)
		}
	}
	if d := cmp.Diff([]account.PeerID{"c1", "c2"}, got); d != "" {
		t.Errorf("changes (-want +got):\n%s", d)
	}
	// The other way round too.
	changes, ok = PeerLocal(cur, old)
	if !ok || len(changes) != 2 {
		t.Fatalf("back: %v %v", changes, ok)
	}
}

// sentDNS compares DNS configurations by what a map sends of them (not
// which groups they are distributed to, nor their names).
var sentDNS = cmp.Options{cmp.Comparer(func(x, y netip.Addr) bool { return x == y }),
	cmpopts.IgnoreFields(account.NameserverGroup{}, "Groups", "Name", "Description"), cmpopts.IgnoreFields(account.Zone{}, "DistributionGroups", "Name")}

// TestDNSPeerLocalRandom: for random accounts and random changes (DNS
// configuration, memberships, peers joining), every peer that PeerLocal
// does not list keeps exactly its DNS configuration: a delta, which
// carries none, leaves no peer with stale DNS.
func TestDNSPeerLocalRandom(t *testing.T) {
	for seed := range uint64(300) {
		rng := rand.New(rand.NewPCG(seed, 21))
		acc := account.Account{ID: "a", Domain: "d.test", Network: netip.MustParsePrefix("100.70.0.0/16"), Serial: 1}
		var peers []account.Peer
		for i := range 3 + rng.IntN(8) {
			peers = append(peers, account.Peer{ID: account.PeerID(fmt.Sprintf("p%02d", i)), IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(10 + i)})})
		}
		mkAccess := func() Access {
			a := defaults(acc.ID)
			for g := range 3 {
				grp := account.Group{ID: account.GroupID(fmt.Sprintf("g%d", g))}
				for _, p := range peers {
					if rng.IntN(2) == 0 {
						grp.Peers = append(grp.Peers, p.ID)
					}
				}
				a.Groups = append(a.Groups, grp)
			}
			pick := func() []account.GroupID { return gs(a.Groups[rng.IntN(len(a.Groups))].ID) }
			for i := range rng.IntN(3) {
				g := nsGroup(account.NameserverGroupID(fmt.Sprint("ns", i)), pick())
				g.Enabled = rng.IntN(4) > 0
				if rng.IntN(3) == 0 {
					g.Nameservers = append(g.Nameservers, ns(peers[rng.IntN(len(peers))].IP.String()))
				}
				a.NameserverGroups = append(a.NameserverGroups, g)
			}
			for i := range rng.IntN(3) {
				a.Zones = append(a.Zones, zone(account.ZoneID(fmt.Sprint("z", i)), fmt.Sprintf("z%d.example", i), pick()))
			}
			if rng.IntN(3) == 0 {
				a.DNSSettings.DisabledManagementGroups = pick()
			}
			return a
		}
		state := rand.New(rand.NewPCG(seed, 22))
		rng = state
		a1 := mkAccess()
		old := NewIndex(acc, peers, a1)
		// The same account with the generator re-seeded differently for
		// some parts: any mix of DNS and membership changes.
		rng = rand.New(rand.NewPCG(seed, uint64(22+rng.IntN(2))))
		a2 := mkAccess()
		if rng.IntN(2) == 0 {
			a2.Groups = a1.Groups // only DNS may differ
		}
		acc.Serial++
		cur := NewIndex(acc, peers, a2)
		changes, ok := PeerLocal(old, cur)
		if !ok {
			continue
		}
		listed := map[account.PeerID]bool{}
		for _, c := range changes {
			listed[c.ID] = true
		}
		for _, p := range peers {
			a, _ := old.Compute(p.ID)
			b, _ := cur.Compute(p.ID)
			if !listed[p.ID] && !cmp.Equal(a.DNS, b.DNS, sentDNS) {
				t.Fatalf("seed %d: %s not listed, but its DNS went from %+v to %+v", seed, p.ID, summarizeDNS(a.DNS), summarizeDNS(b.DNS))
			}
		}
	}
}
