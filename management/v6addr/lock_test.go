package v6addr_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/v6addr"
)

// lockFixture: an account with the overlay enabled for group v6 (peer p1)
// and a group g (nobody); peers p1 and p2 report the capability and have
// no address yet.
func lockFixture(t *testing.T, st *store.Store) account.Account {
	t.Helper()
	acc := account.Account{ID: "a", Domain: "x.y", Network: netip.MustParsePrefix("100.70.0.0/16"),
		NetworkV6: netip.MustParsePrefix("fd00:aa::/64"), CreatedAt: time.Now(), Settings: account.DefaultSettings()}
	acc.Settings.IPv6EnabledGroups = []account.GroupID{"v6"}
	err := st.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.InsertAccount(ctx, acc); err != nil {
			return err
		}
		at := tx.In(acc.ID)
		all, _ := store.DefaultAccess(acc.ID)
		for _, g := range []account.Group{all, {ID: "v6", AccountID: acc.ID, Name: "v6", Peers: []account.PeerID{"p1"}},
			{ID: "g", AccountID: acc.ID, Name: "g", Peers: []account.PeerID{}}} {
			if err := at.PutGroup(ctx, g); err != nil {
				return err
			}
		}
		for n := 1; n <= 2; n++ {
			k, err := key.NewPrivate()
			if err != nil {
				return err
			}
			id := fmt.Sprint("p", n)
			if err := at.InsertPeer(ctx, account.Peer{ID: account.PeerID(id), AccountID: acc.ID, Key: k.Public(), IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(n)}),
				Name: id, DNSLabel: id, Meta: account.Meta{Hostname: "h", IPv6Overlay: true}, CreatedAt: time.Now()}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return acc
}

// holdLock runs fn in a transaction that holds acc's lock until the
// returned release is called; release returns the transaction's error.
func holdLock(t *testing.T, st *store.Store, acc account.ID, fn func(at *store.AccountTx) error) (release func() error) {
	t.Helper()
	locked, rel, done := make(chan error, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- st.Tx(ctx, func(tx *store.Tx) error {
			at := tx.In(acc)
			_, err := at.Lock(ctx)
			if err == nil {
				err = fn(at)
			}
			locked <- err
			<-rel
			return err
		})
	}()
	if err := <-locked; err != nil {
		t.Fatal(err)
	}
	once := false
	release = func() error {
		if once {
			return nil
		}
		once = true
		close(rel)
		return <-done
	}
	t.Cleanup(func() { release() })
	return release
}

func postgres(t *testing.T) storetest.Engine {
	for _, e := range storetest.Engines(t) {
		if e.Name == store.Postgres {
			return e
		}
	}
	t.Fatal("no Postgres engine")
	return storetest.Engine{}
}

// TestAssignNoLock: the metadata report of a capable peer in no enabled
// group, which changes nothing, takes no account lock (on Postgres: it
// does not wait for a writer holding the account) and writes nothing.
// SQLite's transactions exclude each other, so only Postgres can show it.
func TestAssignNoLock(t *testing.T) {
	st := postgres(t).Open(t)
	acc := lockFixture(t, st)
	release := holdLock(t, st, acc.ID, func(*store.AccountTx) error { return nil })
	p := account.Peer{ID: "p2", AccountID: acc.ID, Meta: account.Meta{Hostname: "h", IPv6Overlay: true}}
	tctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	err := st.Tx(tctx, func(tx *store.Tx) error {
		_, changed, err := v6addr.Assign(tctx, tx.In(acc.ID), acc, &p)
		if err == nil && changed {
			err = fmt.Errorf("Assign changed p2's address to %s", p.IPv6)
		}
		return err
	})
	if err != nil {
		t.Fatalf("Assign for a peer in no enabled group waited for the account lock or failed: %v", err)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	// p1 (in v6) is given its address, under the lock.
	p1 := account.Peer{ID: "p1", AccountID: acc.ID, Meta: account.Meta{Hostname: "h", IPv6Overlay: true}}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		_, changed, err := v6addr.Assign(ctx, tx.In(acc.ID), acc, &p1)
		if err == nil && (!changed || !acc.NetworkV6.Contains(p1.IPv6)) {
			err = fmt.Errorf("Assign(p1) = %t, %s", changed, p1.IPv6)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestAssignStaleAccount: Assign decides by the account as it is when it
// locks, and returns that state, when the caller's copy predates a
// settings change enabling the peer's group.
func TestAssignStaleAccount(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		stale := lockFixture(t, st)
		// Now g is enabled too and holds p2, whose agent newly reports
		// the capability.
		err := st.Tx(ctx, func(tx *store.Tx) error {
			at := tx.In(stale.ID)
			if err := at.PutGroup(ctx, account.Group{ID: "g", AccountID: stale.ID, Name: "g", Peers: []account.PeerID{"p2"}}); err != nil {
				return err
			}
			s := stale.Settings
			s.IPv6EnabledGroups = []account.GroupID{"v6", "g"}
			p, err := at.Peer(ctx, "p2")
			if err != nil {
				return err
			}
			p.Meta.IPv6Overlay = false
			if err := at.UpdatePeer(ctx, p); err != nil {
				return err
			}
			return at.UpdateSettings(ctx, s)
		})
		if err != nil {
			t.Fatal(err)
		}
		p := account.Peer{ID: "p2", AccountID: stale.ID, Meta: account.Meta{Hostname: "h", IPv6Overlay: true}}
		err = st.Tx(ctx, func(tx *store.Tx) error {
			got, changed, err := v6addr.Assign(ctx, tx.In(stale.ID), stale, &p)
			if err == nil && (!changed || !stale.NetworkV6.Contains(p.IPv6) || len(got.Settings.IPv6EnabledGroups) != 2) {
				err = fmt.Errorf("Assign = %v, %t, %s; want an address and the current settings", got.Settings.IPv6EnabledGroups, changed, p.IPv6)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// TestGroupsChangedWaitsForSettings: a member added to a group while a
// settings change enabling that group is in flight gets its address: the
// group change reads the settings only once the settings change has
// committed (it waits for the account lock).
func TestGroupsChangedWaitsForSettings(t *testing.T) {
	st := postgres(t).Open(t)
	acc := lockFixture(t, st)
	release := holdLock(t, st, acc.ID, func(at *store.AccountTx) error {
		s := acc.Settings
		s.IPv6EnabledGroups = []account.GroupID{"v6", "g"}
		if err := at.UpdateSettings(ctx, s); err != nil {
			return err
		}
		cur, err := at.Account(ctx)
		if err != nil {
			return err
		}
		_, err = v6addr.Reconcile(ctx, at, cur) // g is still empty for it
		return err
	})
	done := make(chan error, 1)
	go func() {
		done <- st.Tx(ctx, func(tx *store.Tx) error {
			at := tx.In(acc.ID)
			if err := at.PutGroup(ctx, account.Group{ID: "g", AccountID: acc.ID, Name: "g", Peers: []account.PeerID{"p2"}}); err != nil {
				return err
			}
			_, err := v6addr.GroupsChanged(ctx, at, "g")
			return err
		})
	}()
	select {
	case err := <-done: // ran without waiting: only right if it failed
		if err == nil {
			t.Error("the group change did not wait for the settings change holding the account")
		}
		done <- err
	case <-time.After(500 * time.Millisecond):
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	err := st.Read(ctx, func(tx *store.Tx) error {
		p, err := tx.In(acc.ID).Peer(ctx, "p2")
		if err == nil && !acc.NetworkV6.Contains(p.IPv6) {
			err = fmt.Errorf("p2 joined enabled group g but has no address (%s)", p.IPv6)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
