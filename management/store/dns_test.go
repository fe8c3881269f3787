package store_test

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestDNSStore: nameserver groups, DNS settings, zones and records
// round-trip on both engines, every write bumps the view revision, reads
// stay inside the account, zone domains are unique in an account, deleting
// a zone removes its records, and export/import and account deletion carry
// the new tables.
func TestDNSStore(t *testing.T) {
	eq := cmpopts.EquateComparable(netip.Addr{})
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		acc := mkAccount(t, st, "acc-dns", "100.64.0.0/16")
		other := mkAccount(t, st, "acc-dns-other", "100.65.0.0/16")

		write, read := accountRW(t, st, acc.ID)

		// Settings never saved read as the zero value with an empty list.
		read(func(at *store.AccountTx) error {
			s, err := at.DNSSettings(ctx)
			if err != nil {
				return err
			}
			if s.DisabledManagementGroups == nil || len(s.DisabledManagementGroups) != 0 {
				t.Errorf("unsaved settings: %#v, want an empty list", s)
			}
			return nil
		})

		ns1 := account.NameserverGroup{ID: "ns1", AccountID: acc.ID, Name: "corp", Description: "split",
			Nameservers: []account.Nameserver{{IP: netip.MustParseAddr("10.0.0.53"), NSType: "udp", Port: 53}, {IP: netip.MustParseAddr("fd00::53"), NSType: "udp", Port: 5353}},
			Enabled:     true, Groups: []account.GroupID{"g1", "g2"}, Domains: []string{"corp.example", "xn--bcher-kva.example"}, SearchDomainsEnabled: true}
		ns2 := account.NameserverGroup{ID: "ns2", AccountID: acc.ID, Name: "all", Nameservers: []account.Nameserver{{IP: netip.MustParseAddr("1.1.1.1"), NSType: "udp", Port: 53}},
			Groups: []account.GroupID{"g1"}, Primary: true, Domains: []string{}}
		write("put ns group", func(at *store.AccountTx) error { return at.PutNameserverGroup(ctx, ns1) })
		write("put primary ns group", func(at *store.AccountTx) error { return at.PutNameserverGroup(ctx, ns2) })
		ns1.Enabled = false
		write("replace ns group", func(at *store.AccountTx) error { return at.PutNameserverGroup(ctx, ns1) })
		settings := account.DNSSettings{DisabledManagementGroups: []account.GroupID{"g2"}}
		write("put settings", func(at *store.AccountTx) error { return at.PutDNSSettings(ctx, settings) })
		settings.DisabledManagementGroups = []account.GroupID{"g1", "g2"}
		write("replace settings", func(at *store.AccountTx) error { return at.PutDNSSettings(ctx, settings) })

		z1 := account.Zone{ID: "z1", AccountID: acc.ID, Name: "internal", Domain: "internal.example", EnableSearchDomain: true, DistributionGroups: []account.GroupID{"g1"}, Enabled: true}
		write("put zone", func(at *store.AccountTx) error { return at.PutZone(ctx, z1) })
		recs := []account.Record{
			{ID: "r1", ZoneID: z1.ID, Name: "db.internal.example", Type: account.RecordA, Content: "10.1.0.5", TTL: 300},
			{ID: "r2", ZoneID: z1.ID, Name: "db.internal.example", Type: account.RecordAAAA, Content: "fd00::5", TTL: 60},
			{ID: "r3", ZoneID: z1.ID, Name: "app.internal.example", Type: account.RecordCNAME, Content: "db.internal.example", TTL: 0},
		}
		for _, r := range recs {
			write("put record "+string(r.ID), func(at *store.AccountTx) error { return at.PutRecord(ctx, r) })
		}
		recs[0].Content = "10.1.0.6"
		write("replace record", func(at *store.AccountTx) error { return at.PutRecord(ctx, recs[0]) })
		// Sorted by name, then type.
		z1.Records = []account.Record{recs[2], recs[0], recs[1]}
		z2 := account.Zone{ID: "z2", AccountID: acc.ID, Name: "empty", Domain: "a.example", DistributionGroups: []account.GroupID{"g2"}, Records: []account.Record{}}
		write("put empty zone", func(at *store.AccountTx) error { return at.PutZone(ctx, z2) })

		read(func(at *store.AccountTx) error {
			gs, err := at.NameserverGroups(ctx)
			if err != nil {
				return err
			}
			if d := cmp.Diff([]account.NameserverGroup{ns2, ns1}, gs, eq); d != "" {
				t.Errorf("nameserver groups (-want +got):\n%s", d)
			}
			g, err := at.NameserverGroup(ctx, ns1.ID)
			if err != nil {
				return err
			}
			if d := cmp.Diff(ns1, g, eq); d != "" {
				t.Errorf("nameserver group (-want +got):\n%s", d)
			}
			s, err := at.DNSSettings(ctx)
			if err != nil {
				return err
			}
			if d := cmp.Diff(settings, s); d != "" {
				t.Errorf("settings (-want +got):\n%s", d)
			}
			zs, err := at.Zones(ctx)
			if err != nil {
				return err
			}
			if d := cmp.Diff([]account.Zone{z2, z1}, zs); d != "" {
				t.Errorf("zones (-want +got):\n%s", d)
			}
			z, err := at.Zone(ctx, z1.ID)
			if err != nil {
				return err
			}
			if d := cmp.Diff(z1, z); d != "" {
				t.Errorf("zone (-want +got):\n%s", d)
			}
			r, err := at.Record(ctx, z1.ID, "r1")
			if err != nil {
				return err
			}
			if d := cmp.Diff(recs[0], r); d != "" {
				t.Errorf("record (-want +got):\n%s", d)
			}
			if _, err := at.Record(ctx, z2.ID, "r1"); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("record through the wrong zone: %v, want ErrNotFound", err)
			}
			return nil
		})

		// A second zone with the same domain conflicts; a record of a
		// missing zone is not found.
		dup := z2
		dup.ID = "z3"
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).PutZone(ctx, dup) }); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate zone domain: %v, want ErrConflict", err)
		}
		orphan := recs[0]
		orphan.ID, orphan.ZoneID = "r9", "nope"
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).PutRecord(ctx, orphan) }); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("record of a missing zone: %v, want ErrNotFound", err)
		}

		// Another account sees none of it and cannot change it.
		if err := st.Read(ctx, func(tx *store.Tx) error {
			o := tx.In(other.ID)
			if gs, err := o.NameserverGroups(ctx); err != nil || len(gs) != 0 {
				t.Errorf("other account nameserver groups: %v %v", gs, err)
			}
			if zs, err := o.Zones(ctx); err != nil || len(zs) != 0 {
				t.Errorf("other account zones: %v %v", zs, err)
			}
			if s, err := o.DNSSettings(ctx); err != nil || len(s.DisabledManagementGroups) != 0 {
				t.Errorf("other account settings: %v %v", s, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		for name, fn := range map[string]func(o *store.AccountTx) error{
			"ns group": func(o *store.AccountTx) error { return o.DeleteNameserverGroup(ctx, ns1.ID) },
			"zone":     func(o *store.AccountTx) error { return o.DeleteZone(ctx, z1.ID) },
			"record":   func(o *store.AccountTx) error { return o.DeleteRecord(ctx, z1.ID, "r1") },
			"put record": func(o *store.AccountTx) error {
				return o.PutRecord(ctx, account.Record{ID: "rx", ZoneID: z1.ID, Name: "x.internal.example", Type: account.RecordA, Content: "10.0.0.1"})
			},
		} {
			if err := st.Tx(ctx, func(tx *store.Tx) error { return fn(tx.In(other.ID)) }); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("%s from another account: %v, want ErrNotFound", name, err)
			}
		}

		// Export and import into a fresh store of the same engine.
		var d store.Dump
		read(func(at *store.AccountTx) error {
			var err error
			d, err = at.Export(ctx)
			return err
		})
		if len(d.NameserverGroups) != 2 || d.DNSSettings == nil || len(d.Zones) != 2 {
			t.Fatalf("export: %d nameserver groups, settings %v, %d zones", len(d.NameserverGroups), d.DNSSettings, len(d.Zones))
		}
		st2 := e.Open(t)
		if err := st2.Tx(ctx, func(tx *store.Tx) error { return tx.Import(ctx, d) }); err != nil {
			t.Fatalf("import: %v", err)
		}
		var d2 store.Dump
		if err := st2.Read(ctx, func(tx *store.Tx) error {
			var err error
			d2, err = tx.In(acc.ID).Export(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff([]any{d.NameserverGroups, d.DNSSettings, d.Zones}, []any{d2.NameserverGroups, d2.DNSSettings, d2.Zones}, eq); diff != "" {
			t.Errorf("re-import (-exported +imported):\n%s", diff)
		}

		// Deleting a record, a nameserver group and a zone (with the rest
		// of its records).
		write("delete record", func(at *store.AccountTx) error { return at.DeleteRecord(ctx, z1.ID, "r2") })
		write("delete ns group", func(at *store.AccountTx) error { return at.DeleteNameserverGroup(ctx, ns2.ID) })
		write("delete zone", func(at *store.AccountTx) error { return at.DeleteZone(ctx, z1.ID) })
		read(func(at *store.AccountTx) error {
			if rs, err := at.ZoneRecords(ctx, z1.ID); err != nil || len(rs) != 0 {
				t.Errorf("records of the deleted zone: %v %v", rs, err)
			}
			if _, err := at.NameserverGroup(ctx, ns2.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("deleted nameserver group: %v, want ErrNotFound", err)
			}
			return nil
		})

		// Deleting the account leaves nothing in the new tables.
		write("put zone again", func(at *store.AccountTx) error { return at.PutZone(ctx, z1) })
		write("put record again", func(at *store.AccountTx) error { return at.PutRecord(ctx, recs[0]) })
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.DeleteAccount(ctx, acc.ID) }); err != nil {
			t.Fatal(err)
		}
		if err := st.Read(ctx, func(tx *store.Tx) error {
			left, err := tx.AccountRows(ctx, acc.ID)
			if len(left) != 0 {
				t.Errorf("rows left after deleting the account: %v", left)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})
}
