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

// TestRoutingStore: routes, networks, resources and routers round-trip on
// both engines, every write bumps the view revision, reads stay inside the
// account, deleting a network removes its resources and routers, resource
// names are unique in an account, and export/import and account deletion
// carry the new tables.
func TestRoutingStore(t *testing.T) {
	eq := cmpopts.EquateComparable(netip.Prefix{})
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		acc := mkAccount(t, st, "acc-rt", "100.64.0.0/16")
		other := mkAccount(t, st, "acc-rt-other", "100.65.0.0/16")
		p1 := mkPeer(t, acc, 1)
		insertPeer(t, st, p1)

		write, read := accountRW(t, st, acc.ID)

		r1 := account.Route{ID: "r1", AccountID: acc.ID, NetID: "office", Description: "lan", Enabled: true, Peer: p1.ID,
			Network: netip.MustParsePrefix("10.10.0.0/16"), Metric: 100, Masquerade: true, KeepRoute: true,
			Groups: []account.GroupID{"g1"}, AccessControlGroups: []account.GroupID{"g2"}, PeerGroups: []account.GroupID{}, Domains: []string{}}
		r2 := account.Route{ID: "r2", AccountID: acc.ID, NetID: "apps", Enabled: true, PeerGroups: []account.GroupID{"g3"},
			Domains: []string{"example.com", "*.corp.example"}, Metric: 9999, Groups: []account.GroupID{"g1"},
			AccessControlGroups: []account.GroupID{}, SkipAutoApply: true}
		write("put route", func(at *store.AccountTx) error { return at.PutRoute(ctx, r1) })
		write("put domain route", func(at *store.AccountTx) error { return at.PutRoute(ctx, r2) })
		r1.Metric = 50
		write("replace route", func(at *store.AccountTx) error { return at.PutRoute(ctx, r1) })
		read(func(at *store.AccountTx) error {
			got, err := at.Routes(ctx)
			if err != nil {
				return err
			}
			if d := cmp.Diff([]account.Route{r2, r1}, got, eq); d != "" {
				t.Errorf("routes (-want +got):\n%s", d)
			}
			one, err := at.Route(ctx, "r1")
			if err != nil {
				return err
			}
			if d := cmp.Diff(r1, one, eq); d != "" {
				t.Errorf("route (-want +got):\n%s", d)
			}
			return nil
		})

		n1 := account.Network{ID: "n1", AccountID: acc.ID, Name: "prod", Description: "the prod VPC"}
		write("put network", func(at *store.AccountTx) error { return at.PutNetwork(ctx, n1) })
		res := account.NetworkResource{ID: "res1", NetworkID: n1.ID, AccountID: acc.ID, Name: "db", Type: account.ResourceHost,
			Address: "10.20.0.5", Prefix: netip.MustParsePrefix("10.20.0.5/32"), Enabled: true, Groups: []account.GroupID{"g1"}}
		dom := account.NetworkResource{ID: "res2", NetworkID: n1.ID, AccountID: acc.ID, Name: "web", Type: account.ResourceDomain,
			Address: "*.example.com", Domain: "*.example.com", Enabled: true, Groups: []account.GroupID{}}
		write("put resource", func(at *store.AccountTx) error { return at.PutNetworkResource(ctx, res) })
		write("put domain resource", func(at *store.AccountTx) error { return at.PutNetworkResource(ctx, dom) })
		rt := account.NetworkRouter{ID: "rt1", NetworkID: n1.ID, AccountID: acc.ID, Peer: p1.ID, PeerGroups: []account.GroupID{}, Metric: 9999, Masquerade: true, Enabled: true}
		write("put router", func(at *store.AccountTx) error { return at.PutNetworkRouter(ctx, rt) })
		read(func(at *store.AccountTx) error {
			ns, err := at.Networks(ctx)
			if err != nil {
				return err
			}
			if d := cmp.Diff([]account.Network{n1}, ns, eq); d != "" {
				t.Errorf("networks (-want +got):\n%s", d)
			}
			rs, err := at.NetworkResources(ctx)
			if err != nil {
				return err
			}
			if d := cmp.Diff([]account.NetworkResource{res, dom}, rs, eq); d != "" {
				t.Errorf("resources (-want +got):\n%s", d)
			}
			rts, err := at.NetworkRouters(ctx)
			if err != nil {
				return err
			}
			if d := cmp.Diff([]account.NetworkRouter{rt}, rts, eq); d != "" {
				t.Errorf("routers (-want +got):\n%s", d)
			}
			return nil
		})

		// A duplicate resource name conflicts; a resource or router of a
		// network that does not exist is not found; nothing is written.
		dup := res
		dup.ID = "res3"
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).PutNetworkResource(ctx, dup) }); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate resource name: %v, want ErrConflict", err)
		}
		orphan := rt
		orphan.ID, orphan.NetworkID = "rt2", "nope"
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).PutNetworkRouter(ctx, orphan) }); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("router of a missing network: %v, want ErrNotFound", err)
		}

		// Another account sees none of it and cannot delete it.
		if err := st.Read(ctx, func(tx *store.Tx) error {
			o := tx.In(other.ID)
			if rs, err := o.Routes(ctx); err != nil || len(rs) != 0 {
				t.Errorf("other account routes: %v %v", rs, err)
			}
			if _, err := o.Network(ctx, n1.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("other account network: %v, want ErrNotFound", err)
			}
			if _, err := o.NetworkResource(ctx, res.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("other account resource: %v, want ErrNotFound", err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(other.ID).DeleteRoute(ctx, r1.ID) }); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("delete from another account: %v, want ErrNotFound", err)
		}

		// Export and import into a fresh store of the same engine.
		var d store.Dump
		read(func(at *store.AccountTx) error {
			var err error
			d, err = at.Export(ctx)
			return err
		})
		if len(d.Routes) != 2 || len(d.Networks) != 1 || len(d.NetworkResources) != 2 || len(d.NetworkRouters) != 1 {
			t.Fatalf("export: %d routes, %d networks, %d resources, %d routers", len(d.Routes), len(d.Networks), len(d.NetworkResources), len(d.NetworkRouters))
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
		if diff := cmp.Diff([]any{d.Routes, d.Networks, d.NetworkResources, d.NetworkRouters}, []any{d2.Routes, d2.Networks, d2.NetworkResources, d2.NetworkRouters}, eq); diff != "" {
			t.Errorf("re-import (-exported +imported):\n%s", diff)
		}

		// Deleting the network removes its resources and routers.
		write("delete network", func(at *store.AccountTx) error { return at.DeleteNetwork(ctx, n1.ID) })
		write("delete route", func(at *store.AccountTx) error { return at.DeleteRoute(ctx, r1.ID) })
		read(func(at *store.AccountTx) error {
			rs, err := at.NetworkResources(ctx)
			if err != nil {
				return err
			}
			rts, err := at.NetworkRouters(ctx)
			if err != nil {
				return err
			}
			if len(rs) != 0 || len(rts) != 0 {
				t.Errorf("after deleting the network: %d resources, %d routers left", len(rs), len(rts))
			}
			if _, err := at.Route(ctx, r1.ID); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("deleted route: %v, want ErrNotFound", err)
			}
			return nil
		})

		// Deleting the account leaves nothing in the new tables.
		n2 := account.Network{ID: "n2", AccountID: acc.ID, Name: "stage"}
		write("put network 2", func(at *store.AccountTx) error { return at.PutNetwork(ctx, n2) })
		res.NetworkID = n2.ID
		write("put resource 2", func(at *store.AccountTx) error { return at.PutNetworkResource(ctx, res) })
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
