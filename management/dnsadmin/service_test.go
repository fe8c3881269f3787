package dnsadmin

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

type notifier struct {
	mu   sync.Mutex
	seen int
}

func (n *notifier) AccountChanged(account.ID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen++
}

func (n *notifier) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen
}

var testRefs = refs{
	acct:   account.Account{ID: "acc", Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.70.0.0/16")},
	groups: map[account.GroupID]account.Group{"g1": {ID: "g1", Name: "one"}, "g2": {ID: "g2", Name: "two"}},
}

func udp(ip string) account.Nameserver {
	return account.Nameserver{IP: netip.MustParseAddr(ip), NSType: NSTypeUDP, Port: 53}
}

// TestCheckNameserverGroup: each of NetBird's rules refuses with a message
// naming the field; accepted groups come back normalized.
func TestCheckNameserverGroup(t *testing.T) {
	ok := func() account.NameserverGroup {
		return account.NameserverGroup{ID: "n1", Name: " corp ", Nameservers: []account.Nameserver{udp("10.0.0.53")},
			Groups: []account.GroupID{"g1", "g1"}, Domains: []string{"Corp.Example.", "bücher.example", "corp.example"}, SearchDomainsEnabled: true}
	}
	others := []account.NameserverGroup{{ID: "n2", Name: "taken"}}
	for _, tc := range []struct {
		name string
		edit func(g *account.NameserverGroup)
		want string // "" accepts
	}{
		{"valid", func(*account.NameserverGroup) {}, ""},
		{"primary", func(g *account.NameserverGroup) { g.Primary, g.Domains, g.SearchDomainsEnabled = true, nil, false }, ""},
		{"empty name", func(g *account.NameserverGroup) { g.Name = "  " }, "name: must have 1 to 40"},
		{"long name", func(g *account.NameserverGroup) { g.Name = strings.Repeat("é", 41) }, "name: must have 1 to 40"},
		{"duplicate name", func(g *account.NameserverGroup) { g.Name = "taken" }, `name: a nameserver group named "taken"`},
		{"long description", func(g *account.NameserverGroup) { g.Description = strings.Repeat("x", 1025) }, "description:"},
		{"no nameservers", func(g *account.NameserverGroup) { g.Nameservers = nil }, "nameservers: 0 given"},
		{"four nameservers", func(g *account.NameserverGroup) {
			g.Nameservers = []account.Nameserver{udp("1.1.1.1"), udp("1.0.0.1"), udp("8.8.8.8"), udp("9.9.9.9")}
		}, "nameservers: 4 given"},
		{"no ip", func(g *account.NameserverGroup) { g.Nameservers[0].IP = netip.Addr{} }, "nameservers[0].ip: not an IP"},
		{"overlay ip", func(g *account.NameserverGroup) { g.Nameservers[0].IP = netip.MustParseAddr("100.70.0.9") }, "inside the account's peer network"},
		{"mapped overlay ip", func(g *account.NameserverGroup) { g.Nameservers[0].IP = netip.MustParseAddr("::ffff:100.70.0.9") }, "inside the account's peer network"},
		{"unspecified", func(g *account.NameserverGroup) { g.Nameservers[0].IP = netip.MustParseAddr("::") }, "not a unicast address"},
		{"multicast", func(g *account.NameserverGroup) { g.Nameservers[0].IP = netip.MustParseAddr("224.0.0.251") }, "not a unicast address"},
		{"tcp", func(g *account.NameserverGroup) { g.Nameservers[0].NSType = "tcp" }, "nameservers[0].ns_type"},
		{"port 0", func(g *account.NameserverGroup) { g.Nameservers[0].Port = 0 }, "nameservers[0].port: 0"},
		{"port too big", func(g *account.NameserverGroup) { g.Nameservers[0].Port = 65536 }, "nameservers[0].port: 65536"},
		{"primary with domains", func(g *account.NameserverGroup) { g.Primary = true }, "primary:"},
		{"neither", func(g *account.NameserverGroup) { g.Domains = nil }, "domains: required"},
		{"search without domains", func(g *account.NameserverGroup) { g.Primary, g.Domains = true, nil }, "search_domains_enabled:"},
		{"bad domain", func(g *account.NameserverGroup) { g.Domains = []string{"bad_domain.example"} }, "domains:"},
		{"long label", func(g *account.NameserverGroup) { g.Domains = []string{strings.Repeat("a", 64) + ".example"} }, "domains:"},
		{"wildcard", func(g *account.NameserverGroup) { g.Domains = []string{"*.example.com"} }, "wildcards are not allowed"},
		{"no groups", func(g *account.NameserverGroup) { g.Groups = nil }, "groups: at least one group"},
		{"unknown group", func(g *account.NameserverGroup) { g.Groups = []account.GroupID{"nope"} }, `groups: group "nope" does not exist`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := ok()
			tc.edit(&g)
			err := testRefs.checkNameserverGroup(&g, others)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
	g := ok()
	if err := testRefs.checkNameserverGroup(&g, others); err != nil {
		t.Fatal(err)
	}
	want := account.NameserverGroup{ID: "n1", Name: "corp", Nameservers: []account.Nameserver{udp("10.0.0.53")},
		Groups: []account.GroupID{"g1"}, Domains: []string{"corp.example", "xn--bcher-kva.example"}, SearchDomainsEnabled: true}
	if d := cmp.Diff(want, g, cmpopts.EquateComparable(netip.Addr{})); d != "" {
		t.Errorf("normalized (-want +got):\n%s", d)
	}
}

// TestCheckRecord: record names stay in their zone, contents match their
// type, CNAMEs neither share a name nor loop, identical records conflict.
func TestCheckRecord(t *testing.T) {
	zone := account.Zone{ID: "z", Domain: "example.com", Records: []account.Record{
		{ID: "a", Name: "db.example.com", Type: account.RecordA, Content: "10.0.0.5", TTL: 60},
		{ID: "c1", Name: "app.example.com", Type: account.RecordCNAME, Content: "web.example.com"},
		{ID: "c2", Name: "web.example.com", Type: account.RecordCNAME, Content: "front.example.com"},
	}}
	for _, tc := range []struct {
		name string
		rec  account.Record
		want string // "" accepts; "conflict" wants ErrConflict
	}{
		{"apex A", account.Record{Name: "example.com", Type: "A", Content: "10.0.0.1"}, ""},
		{"second A", account.Record{Name: "db.example.com", Type: "A", Content: "10.0.0.6"}, ""},
		{"AAAA", account.Record{Name: "db.example.com", Type: "AAAA", Content: "fd00::5"}, ""},
		{"wildcard", account.Record{Name: "*.example.com", Type: "A", Content: "10.0.0.1"}, ""},
		{"cname outside", account.Record{Name: "x.example.com", Type: "CNAME", Content: "www.other.org"}, ""},
		{"replace keeps id", account.Record{ID: "a", Name: "db.example.com", Type: "A", Content: "10.0.0.5", TTL: 30}, ""},
		{"outside zone", account.Record{Name: "db.example.org", Type: "A", Content: "10.0.0.1"}, "name: db.example.org is not in the zone"},
		{"suffix trick", account.Record{Name: "badexample.com", Type: "A", Content: "10.0.0.1"}, "is not in the zone"},
		{"bad name", account.Record{Name: "a..example.com", Type: "A", Content: "10.0.0.1"}, "name:"},
		{"A with v6", account.Record{Name: "x.example.com", Type: "A", Content: "fd00::1"}, "an A record holds an IPv4"},
		{"AAAA with v4", account.Record{Name: "x.example.com", Type: "AAAA", Content: "10.0.0.1"}, "an AAAA record holds an IPv6"},
		{"AAAA mapped", account.Record{Name: "x.example.com", Type: "AAAA", Content: "::ffff:10.0.0.1"}, "an AAAA record holds an IPv6"},
		{"not an ip", account.Record{Name: "x.example.com", Type: "A", Content: "ten"}, "is not an IP"},
		{"empty content", account.Record{Name: "x.example.com", Type: "A"}, "content: must have"},
		{"type MX", account.Record{Name: "x.example.com", Type: "MX", Content: "mail.example.com"}, "type:"},
		{"negative ttl", account.Record{Name: "x.example.com", Type: "A", Content: "10.0.0.1", TTL: -1}, "ttl:"},
		{"huge ttl", account.Record{Name: "x.example.com", Type: "A", Content: "10.0.0.1", TTL: MaxTTL + 1}, "ttl:"},
		{"cname self", account.Record{Name: "x.example.com", Type: "CNAME", Content: "X.example.com."}, "cannot point at its own name"},
		{"cname bad target", account.Record{Name: "x.example.com", Type: "CNAME", Content: "*.example.com"}, "wildcards"},
		{"cname on A name", account.Record{Name: "db.example.com", Type: "CNAME", Content: "x.example.com"}, "already has a A record"},
		{"A on cname name", account.Record{Name: "app.example.com", Type: "A", Content: "10.0.0.1"}, "already has a CNAME record"},
		{"cname loop", account.Record{Name: "front.example.com", Type: "CNAME", Content: "app.example.com"}, "CNAME loop"},
		{"cname loop by update", account.Record{ID: "c2", Name: "web.example.com", Type: "CNAME", Content: "app.example.com"}, "CNAME loop"},
		{"identical", account.Record{Name: "DB.example.com", Type: "A", Content: "10.0.0.5"}, "conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.rec
			if r.ID == "" {
				r.ID = "new"
			}
			err := checkRecord(zone, &r)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "conflict" && !errors.Is(err, ErrConflict):
				t.Fatalf("got %v, want ErrConflict", err)
			case tc.want != "" && tc.want != "conflict" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
}

// TestCheckZone: zones need a name, a valid domain outside the peers' DNS
// domain, unique in the account, and distribution groups.
func TestCheckZone(t *testing.T) {
	others := []account.Zone{{ID: "z2", Domain: "taken.example"}}
	for _, tc := range []struct {
		name string
		z    account.Zone
		want string
	}{
		{"valid", account.Zone{Name: "corp", Domain: "Corp.Example.", DistributionGroups: []account.GroupID{"g1"}}, ""},
		{"no name", account.Zone{Name: " ", Domain: "corp.example", DistributionGroups: []account.GroupID{"g1"}}, "name:"},
		{"bad domain", account.Zone{Name: "x", Domain: "corp_example", DistributionGroups: []account.GroupID{"g1"}}, "domain:"},
		{"wildcard domain", account.Zone{Name: "x", Domain: "*.corp.example", DistributionGroups: []account.GroupID{"g1"}}, "wildcards"},
		{"peer domain", account.Zone{Name: "x", Domain: "netbird.selfhosted", DistributionGroups: []account.GroupID{"g1"}}, "conflicts with the peers' DNS domain"},
		{"under peer domain", account.Zone{Name: "x", Domain: "sub.netbird.selfhosted", DistributionGroups: []account.GroupID{"g1"}}, "conflicts with the peers' DNS domain"},
		{"no groups", account.Zone{Name: "x", Domain: "corp.example"}, "distribution_groups: at least one"},
		{"unknown group", account.Zone{Name: "x", Domain: "corp.example", DistributionGroups: []account.GroupID{"zz"}}, "does not exist"},
		{"duplicate", account.Zone{Name: "x", Domain: "taken.example", DistributionGroups: []account.GroupID{"g1"}}, "conflict"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := tc.z
			err := testRefs.checkZone(&z, others)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want == "" && z.Domain != "corp.example":
				t.Fatalf("domain %q, want corp.example", z.Domain)
			case tc.want == "conflict" && !errors.Is(err, ErrConflict):
				t.Fatalf("got %v, want ErrConflict", err)
			case tc.want != "" && tc.want != "conflict" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("got %v, want ErrInvalid with %q", err, tc.want)
			}
		})
	}
}

// TestServiceCommits: on both engines, an accepted change bumps the
// serial, logs NetBird's activity codes with the injected clock and
// notifies; a refused one, or settings saved unchanged, does none of it;
// a group named by DNS cannot be reported unlinked.
func TestServiceCommits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		acc := account.Account{ID: "acc", Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.70.0.0/16"), CreatedAt: time.Now().UTC()}
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.InsertAccount(ctx, acc); err != nil {
				return err
			}
			at := tx.In(acc.ID)
			for _, g := range []account.Group{{ID: "g1", AccountID: acc.ID, Name: "one"}, {ID: "g2", AccountID: acc.ID, Name: "two"}, {ID: "g3", AccountID: acc.ID, Name: "three"}} {
				g.Peers = []account.PeerID{}
				if err := at.PutGroup(ctx, g); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		at0 := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
		n := &notifier{}
		ids := 0
		s := New(st, n, Options{Now: func() time.Time { return at0 }, NewID: func() string { ids++; return "id" + string(rune('0'+ids)) }})
		state := func() (serial uint64, codes []string) {
			t.Helper()
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				if serial, _, err = tx.In(acc.ID).ViewRevision(ctx); err != nil {
					return err
				}
				evs, err := tx.In(acc.ID).Events(ctx, 0)
				for _, e := range evs {
					if !e.At.Equal(at0) {
						t.Errorf("event %s at %v, want %v", e.Activity, e.At, at0)
					}
					codes = append(codes, e.Activity)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return serial, codes
		}
		step := func(name string, wantCode string, fn func() error) {
			t.Helper()
			s0, c0 := state()
			n0 := n.count()
			err := fn()
			s1, c1 := state()
			if wantCode == "" {
				if err == nil {
					t.Fatalf("%s: accepted, want refused", name)
				}
				if s1 != s0 || len(c1) != len(c0) || n.count() != n0 {
					t.Errorf("%s: refused (%v) but serial %d->%d, events %d->%d, notified %d->%d", name, err, s0, s1, len(c0), len(c1), n0, n.count())
				}
				return
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if s1 != s0+1 || n.count() != n0+1 || len(c1) == 0 || c1[0] != wantCode {
				t.Errorf("%s: serial %d->%d, notified %d->%d, events %v, want one bump and %s", name, s0, s1, n0, n.count(), c1, wantCode)
			}
		}
		var g account.NameserverGroup
		step("add ns group", "nameserver.group.add", func() (err error) {
			g, err = s.PutNameserverGroup(ctx, acc.ID, account.NameserverGroup{Name: "corp", Nameservers: []account.Nameserver{udp("10.0.0.53")},
				Groups: []account.GroupID{"g1"}, Domains: []string{"corp.example"}, Enabled: true}, "u1")
			return err
		})
		step("update ns group", "nameserver.group.update", func() error {
			g.Enabled = false
			_, err := s.PutNameserverGroup(ctx, acc.ID, g, "u1")
			return err
		})
		step("bad ns group", "", func() error {
			bad := g
			bad.Nameservers = []account.Nameserver{udp("100.70.0.1")}
			_, err := s.PutNameserverGroup(ctx, acc.ID, bad, "u1")
			return err
		})
		step("update missing ns group", "", func() error {
			bad := g
			bad.ID = "nope"
			_, err := s.PutNameserverGroup(ctx, acc.ID, bad, "u1")
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("update missing: %v, want ErrNotFound", err)
			}
			return err
		})
		step("settings", "dns.setting.disabled.management.group.add", func() error {
			_, err := s.PutSettings(ctx, acc.ID, account.DNSSettings{DisabledManagementGroups: []account.GroupID{"g2"}}, "u1")
			return err
		})
		if s0, c0 := state(); true {
			if _, err := s.PutSettings(ctx, acc.ID, account.DNSSettings{DisabledManagementGroups: []account.GroupID{"g2"}}, "u1"); err != nil {
				t.Fatal(err)
			}
			if s1, c1 := state(); s1 != s0 || len(c1) != len(c0) {
				t.Errorf("unchanged settings: serial %d->%d, events %d->%d", s0, s1, len(c0), len(c1))
			}
		}
		step("settings swap", "dns.setting.disabled.management.group.delete", func() error {
			_, err := s.PutSettings(ctx, acc.ID, account.DNSSettings{DisabledManagementGroups: []account.GroupID{"g3"}}, "u1")
			return err
		})
		step("settings unknown group", "", func() error {
			_, err := s.PutSettings(ctx, acc.ID, account.DNSSettings{DisabledManagementGroups: []account.GroupID{"nope"}}, "u1")
			return err
		})
		var z account.Zone
		step("zone", "dns.zone.create", func() (err error) {
			z, err = s.PutZone(ctx, acc.ID, account.Zone{Name: "internal", Domain: "internal.example", DistributionGroups: []account.GroupID{"g1"}, Enabled: true}, "u1")
			return err
		})
		step("zone same domain", "", func() error {
			_, err := s.PutZone(ctx, acc.ID, account.Zone{Name: "again", Domain: "internal.example", DistributionGroups: []account.GroupID{"g1"}}, "u1")
			if !errors.Is(err, ErrConflict) {
				t.Errorf("same domain: %v, want ErrConflict", err)
			}
			return err
		})
		var r account.Record
		step("record", "dns.zone.record.create", func() (err error) {
			r, err = s.PutRecord(ctx, acc.ID, z.ID, account.Record{Name: "db.internal.example", Type: "A", Content: "10.1.0.5", TTL: 300}, "u1")
			return err
		})
		step("record update", "dns.zone.record.update", func() error {
			r.TTL = 60
			_, err := s.PutRecord(ctx, acc.ID, z.ID, r, "u1")
			return err
		})
		step("zone rename", "dns.zone.update", func() error {
			z.Name = "renamed"
			got, err := s.PutZone(ctx, acc.ID, z, "u1")
			if err == nil && len(got.Records) != 1 {
				t.Errorf("updated zone has %d records, want its 1", len(got.Records))
			}
			return err
		})
		step("zone domain change", "", func() error {
			moved := z
			moved.Domain = "other.example"
			_, err := s.PutZone(ctx, acc.ID, moved, "u1")
			return err
		})
		step("record of missing zone", "", func() error {
			_, err := s.PutRecord(ctx, acc.ID, "nope", account.Record{Name: "x.internal.example", Type: "A", Content: "10.0.0.1"}, "u1")
			if !errors.Is(err, ErrNotFound) {
				t.Errorf("missing zone: %v, want ErrNotFound", err)
			}
			return err
		})

		// Groups named by DNS are linked, with NetBird's messages.
		for id, want := range map[account.GroupID]string{
			"g1": "group has been linked to name server groups: corp",
			"g3": "group has been linked to disabled DNS management groups: three",
		} {
			err := st.Read(ctx, func(tx *store.Tx) error { return GroupLinked(ctx, tx.In(acc.ID), id) })
			if !errors.Is(err, ErrInUse) || !strings.Contains(err.Error(), want) {
				t.Errorf("group %s linked: %v, want %q", id, err, want)
			}
		}
		if err := st.Read(ctx, func(tx *store.Tx) error { return GroupLinked(ctx, tx.In(acc.ID), "g2") }); err != nil {
			t.Errorf("group g2 is named by nothing: %v", err)
		}

		step("delete record", "dns.zone.record.delete", func() error { return s.DeleteRecord(ctx, acc.ID, z.ID, r.ID, "u1") })
		step("delete zone", "dns.zone.delete", func() error { return s.DeleteZone(ctx, acc.ID, z.ID, "u1") })
		step("delete ns group", "nameserver.group.delete", func() error { return s.DeleteNameserverGroup(ctx, acc.ID, g.ID, "u1") })
		step("delete missing", "", func() error { return s.DeleteNameserverGroup(ctx, acc.ID, g.ID, "u1") })
	})
}
