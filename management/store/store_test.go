package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

var ctx = context.Background()

func mkAccount(t *testing.T, st *store.Store, id string, net string) account.Account {
	t.Helper()
	a := account.Account{ID: account.ID(id), Domain: "netbird.selfhosted", Network: netip.MustParsePrefix(net), CreatedAt: time.Now().UTC()}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.InsertAccount(ctx, a) }); err != nil {
		t.Fatalf("insert account: %v", err)
	}
	return a
}

func mkPeer(t *testing.T, acc account.Account, n int) account.Peer {
	t.Helper()
	k, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	return account.Peer{
		ID: account.PeerID(fmt.Sprintf("%s-peer-%d", acc.ID, n)), AccountID: acc.ID, Key: k.Public(),
		IP: acc.Network.Addr().Next().Next(), Name: fmt.Sprintf("host %d", n), DNSLabel: fmt.Sprintf("host-%d", n),
		Meta:      account.Meta{Hostname: fmt.Sprintf("host %d", n), OS: "linux", Addresses: []string{"10.0.0.1/24"}},
		CreatedAt: now, LastLogin: now, LastSeen: now,
	}
}

func insertPeer(t *testing.T, st *store.Store, p account.Peer) {
	t.Helper()
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(p.AccountID).InsertPeer(ctx, p) }); err != nil {
		t.Fatalf("insert peer: %v", err)
	}
}

func mkKey(acc account.ID, id string, limit int) account.SetupKey {
	return account.SetupKey{ID: account.SetupKeyID(id), AccountID: acc, Name: "key " + id, Hash: "hash-" + id, Prefix: "ABCDEFGH",
		Reusable: limit != 1, UsageLimit: limit, AutoGroups: []string{"devs"}, CreatedAt: time.Now().UTC()}
}

func TestConformance(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		t.Run("peers", func(t *testing.T) { testPeers(t, e.Open(t)) })
		t.Run("isolation", func(t *testing.T) { testIsolation(t, e.Open(t)) })
		t.Run("setup keys", func(t *testing.T) { testSetupKeys(t, e.Open(t)) })
		t.Run("concurrent consume", func(t *testing.T) { testConcurrentConsume(t, e.Open(t)) })
		t.Run("atomic", func(t *testing.T) { testAtomic(t, e.Open(t)) })
		t.Run("events and serials", func(t *testing.T) { testEvents(t, e.Open(t)) })
		t.Run("settings", func(t *testing.T) { testSettings(t, e.Open(t)) })
		t.Run("groups and policies", func(t *testing.T) { testAccess(t, e.Open(t)) })
		t.Run("identity", func(t *testing.T) { testIdentity(t, e.Open(t)) })
		t.Run("user approval", func(t *testing.T) { testUserApproval(t, e.Open(t)) })
		t.Run("revocation", func(t *testing.T) { testRevocation(t, e.Open(t)) })
		t.Run("refresh tokens", func(t *testing.T) { testRefresh(t, e.Open(t)) })
		t.Run("identity providers", func(t *testing.T) { testIdPs(t, e.Open(t)) })
		t.Run("totp", func(t *testing.T) { testTOTP(t, e.Open(t)) })
		t.Run("password links", func(t *testing.T) { testPasswordLinks(t, e.Open(t)) })
		t.Run("upgrade", func(t *testing.T) { testUpgrade(t, e) })
		t.Run("concurrent migrate", func(t *testing.T) { testConcurrentMigrate(t, e) })
		t.Run("newer schema refused", func(t *testing.T) { testNewerSchema(t, e) })
	})
}

func testPeers(t *testing.T, st *store.Store) {
	acc := mkAccount(t, st, "a", "100.70.0.0/16")
	p := mkPeer(t, acc, 1)
	insertPeer(t, st, p)
	err := st.Read(ctx, func(tx *store.Tx) error {
		got, err := tx.PeerByKey(ctx, p.Key)
		if err != nil {
			return err
		}
		if got.ID != p.ID || got.IP != p.IP || got.Meta.OS != "linux" || len(got.Meta.Addresses) != 1 || !got.CreatedAt.Equal(p.CreatedAt) {
			return fmt.Errorf("read back %+v, want %+v", got, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// Duplicate key, address or label is a conflict.
	for name, mut := range map[string]func(*account.Peer){
		"key":   func(q *account.Peer) { q.IP = q.IP.Next(); q.DNSLabel = "other" },
		"ip":    func(q *account.Peer) { q.Key = mkPeer(t, acc, 9).Key; q.DNSLabel = "other" },
		"label": func(q *account.Peer) { q.Key = mkPeer(t, acc, 9).Key; q.IP = q.IP.Next() },
	} {
		q := p
		q.ID = "dup-" + account.PeerID(name)
		mut(&q)
		err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertPeer(ctx, q) })
		if !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate %s: got %v, want ErrConflict", name, err)
		}
	}
	// InsertPeerIfFree refuses a taken address without breaking the
	// transaction: the caller goes on with another one.
	err = st.Tx(ctx, func(tx *store.Tx) error {
		in := tx.In(acc.ID)
		q := mkPeer(t, acc, 2)
		if ok, err := in.InsertPeerIfFree(ctx, q); ok || err != nil {
			return fmt.Errorf("taken address accepted: %v %v", ok, err)
		}
		q.IP = q.IP.Next()
		if ok, err := in.InsertPeerIfFree(ctx, q); !ok || err != nil {
			return fmt.Errorf("free address refused: %v %v", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	p.Name, p.Connected = "renamed", true
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).UpdatePeer(ctx, p) }); err != nil {
		t.Fatal(err)
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.MarkAllDisconnected(ctx, time.Now().UnixNano()) }); err != nil {
		t.Fatal(err)
	}
	var got account.Peer
	_ = st.Read(ctx, func(tx *store.Tx) error { got, err = tx.In(acc.ID).Peer(ctx, p.ID); return err })
	if err != nil || got.Name != "renamed" || got.Connected {
		t.Fatalf("after update: %+v %v", got, err)
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).DeletePeer(ctx, p.ID) }); err != nil {
		t.Fatal(err)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).DeletePeer(ctx, p.ID) })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
}

func testIsolation(t *testing.T, st *store.Store) {
	a := mkAccount(t, st, "acc-a", "100.71.0.0/16")
	b := mkAccount(t, st, "acc-b", "100.72.0.0/16")
	pa := mkPeer(t, a, 1)
	insertPeer(t, st, pa)
	ka := mkKey(a.ID, "ka", 0)
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(a.ID).InsertSetupKey(ctx, ka) }); err != nil {
		t.Fatal(err)
	}
	// Account B's view cannot see, change or remove A's rows, whatever IDs it is given.
	err := st.Tx(ctx, func(tx *store.Tx) error {
		in := tx.In(b.ID)
		if _, err := in.Peer(ctx, pa.ID); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("B read A's peer: %v", err)
		}
		if ps, err := in.Peers(ctx); err != nil || len(ps) != 0 {
			return fmt.Errorf("B lists %d peers (%v)", len(ps), err)
		}
		q := pa
		q.Name = "hijacked"
		if err := in.UpdatePeer(ctx, q); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("B updated A's peer: %v", err)
		}
		if err := in.SetPeerConnected(ctx, pa.ID, true, 1, ""); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("B marked A's peer: %v", err)
		}
		if err := in.DeletePeer(ctx, pa.ID); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("B deleted A's peer: %v", err)
		}
		if _, err := in.SetupKey(ctx, ka.ID); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("B read A's key: %v", err)
		}
		if err := in.RevokeSetupKey(ctx, ka.ID); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("B revoked A's key: %v", err)
		}
		if ok, err := in.ConsumeSetupKey(ctx, ka.ID, time.Now().UnixNano()); ok || err != nil {
			return fmt.Errorf("B used A's key: %v %v", ok, err)
		}
		if err := in.InsertPeer(ctx, mkPeer(t, a, 2)); err == nil {
			return errors.New("B inserted a peer into A")
		}
		if err := in.InsertSetupKey(ctx, mkKey(a.ID, "kb", 0)); err == nil {
			return errors.New("B inserted a setup key into A")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got account.Peer
	_ = st.Read(ctx, func(tx *store.Tx) error { got, err = tx.In(a.ID).Peer(ctx, pa.ID); return err })
	if err != nil || got.Name != pa.Name || got.Connected {
		t.Fatalf("A's peer changed: %+v %v", got, err)
	}
	var k account.SetupKey
	_ = st.Read(ctx, func(tx *store.Tx) error { k, err = tx.In(a.ID).SetupKey(ctx, ka.ID); return err })
	if err != nil || k.Revoked || k.UsedTimes != 0 {
		t.Fatalf("A's key changed: %+v %v", k, err)
	}
}

func testSetupKeys(t *testing.T, st *store.Store) {
	acc := mkAccount(t, st, "a", "100.73.0.0/16")
	now := time.Now()
	limited := mkKey(acc.ID, "limited", 2)
	expired := mkKey(acc.ID, "expired", 0)
	expired.ExpiresAt = now.Add(-time.Minute)
	revoked := mkKey(acc.ID, "revoked", 0)
	err := st.Tx(ctx, func(tx *store.Tx) error {
		for _, k := range []account.SetupKey{limited, expired, revoked} {
			if err := tx.In(acc.ID).InsertSetupKey(ctx, k); err != nil {
				return err
			}
		}
		return tx.In(acc.ID).RevokeSetupKey(ctx, revoked.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	consume := func(id account.SetupKeyID) bool {
		var ok bool
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			var err error
			ok, err = tx.In(acc.ID).ConsumeSetupKey(ctx, id, now.UnixNano())
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !consume(limited.ID) || !consume(limited.ID) || consume(limited.ID) {
		t.Fatal("a key limited to 2 uses did not allow exactly 2")
	}
	if consume(expired.ID) || consume(revoked.ID) {
		t.Fatal("an expired or revoked key was used")
	}
	var k account.SetupKey
	_ = st.Read(ctx, func(tx *store.Tx) error { k, err = tx.SetupKeyByHash(ctx, limited.Hash); return err })
	if err != nil || k.UsedTimes != 2 || k.AccountID != acc.ID || len(k.AutoGroups) != 1 || k.LastUsed.IsZero() {
		t.Fatalf("by hash: %+v %v", k, err)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, mkKey(acc.ID, "limited", 0)) })
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate key id: %v", err)
	}
}

// testConcurrentConsume races many transactions for a key with a small
// usage limit: exactly the limit may win.
func testConcurrentConsume(t *testing.T, st *store.Store) {
	acc := mkAccount(t, st, "a", "100.74.0.0/16")
	const limit, tries = 5, 40
	k := mkKey(acc.ID, "k", limit)
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, k) }); err != nil {
		t.Fatal(err)
	}
	var won atomic.Int32
	var wg sync.WaitGroup
	for range tries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := st.Tx(ctx, func(tx *store.Tx) error {
				ok, err := tx.In(acc.ID).ConsumeSetupKey(ctx, k.ID, time.Now().UnixNano())
				if ok {
					won.Add(1)
				}
				return err
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if won.Load() != limit {
		t.Fatalf("%d of %d concurrent uses granted, limit %d", won.Load(), tries, limit)
	}
}

func testAtomic(t *testing.T, st *store.Store) {
	acc := mkAccount(t, st, "a", "100.75.0.0/16")
	k := mkKey(acc.ID, "k", 1)
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, k) }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	err := st.Tx(ctx, func(tx *store.Tx) error {
		in := tx.In(acc.ID)
		if ok, err := in.ConsumeSetupKey(ctx, k.ID, time.Now().UnixNano()); !ok || err != nil {
			return fmt.Errorf("consume: %v %v", ok, err)
		}
		if err := in.InsertPeer(ctx, mkPeer(t, acc, 1)); err != nil {
			return err
		}
		if _, err := in.BumpSerial(ctx); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatal(err)
	}
	err = st.Read(ctx, func(tx *store.Tx) error {
		in := tx.In(acc.ID)
		ps, _ := in.Peers(ctx)
		got, _ := in.SetupKey(ctx, k.ID)
		a, _ := in.Account(ctx)
		if len(ps) != 0 || got.UsedTimes != 0 || a.Serial != 0 {
			return fmt.Errorf("rolled-back transaction left %d peers, %d key uses, serial %d", len(ps), got.UsedTimes, a.Serial)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testEvents(t *testing.T, st *store.Store) {
	acc := mkAccount(t, st, "a", "100.76.0.0/16")
	other := mkAccount(t, st, "b", "100.77.0.0/16")
	for i := range 3 {
		err := st.Tx(ctx, func(tx *store.Tx) error {
			in := tx.In(acc.ID)
			if _, err := in.BumpSerial(ctx); err != nil {
				return err
			}
			seq, err := in.InsertEvent(ctx, account.Event{At: time.Now(), Activity: "test", Target: fmt.Sprint(i), Meta: map[string]string{"i": fmt.Sprint(i)}})
			if err == nil && seq != int64(i+1) {
				err = fmt.Errorf("event %d got sequence %d", i, seq)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	err := st.Read(ctx, func(tx *store.Tx) error {
		evs, err := tx.In(acc.ID).Events(ctx, 2)
		if err != nil {
			return err
		}
		if len(evs) != 2 || evs[0].ID != 3 || evs[0].Meta["i"] != "2" {
			return fmt.Errorf("newest two events: %+v", evs)
		}
		if evs, _ := tx.In(other.ID).Events(ctx, 0); len(evs) != 0 {
			return fmt.Errorf("other account sees %d events", len(evs))
		}
		serials, err := tx.Serials(ctx)
		if err != nil {
			return err
		}
		if serials[acc.ID] != 3 || serials[other.ID] != 0 {
			return fmt.Errorf("serials %v", serials)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testSettings(t *testing.T, st *store.Store) {
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.InsertSetting(ctx, "k", "v") }); err != nil {
		t.Fatal(err)
	}
	err := st.Tx(ctx, func(tx *store.Tx) error { return tx.InsertSetting(ctx, "k", "w") })
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second insert: %v", err)
	}
	var v string
	err = st.Read(ctx, func(tx *store.Tx) error { v, err = tx.Setting(ctx, "k"); return err })
	if err != nil || v != "v" {
		t.Fatalf("setting %q %v", v, err)
	}
	err = st.Read(ctx, func(tx *store.Tx) error { _, err = tx.Setting(ctx, "absent"); return err })
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("absent setting: %v", err)
	}
}

// testUpgrade writes data with only the first schema version, as the
// first release did, and checks that opening it migrates with nothing lost.
func testUpgrade(t *testing.T, e storetest.Engine) {
	cfg := e.Config(t)
	old, err := store.OpenNoMigrate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.MigrateTo(ctx, old, 1); err != nil {
		t.Fatal(err)
	}
	if v, _ := old.SchemaVersion(ctx); v != 1 {
		t.Fatalf("old store at version %d", v)
	}
	// Rows as the first release wrote them (its columns only).
	acc := account.Account{ID: "a", Network: netip.MustParsePrefix("100.78.0.0/16")}
	p := mkPeer(t, acc, 1)
	for _, q := range []string{
		`INSERT INTO accounts (id, domain, network, serial, created_at) VALUES ('a', 'netbird.selfhosted', '100.78.0.0/16', 3, 1)`,
		fmt.Sprintf(`INSERT INTO peers (id, account_id, wg_pub_key, ip, name, dns_label, created_at, last_login, last_seen) VALUES ('%s', 'a', '%s', '100.78.0.2', 'host 1', 'host-1', 1, 1, 1)`, p.ID, p.Key),
	} {
		if err := store.ExecForTest(ctx, old, q); err != nil {
			t.Fatal(err)
		}
	}
	k := mkKey(acc.ID, "k", 0)
	if err := old.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, k) }); err != nil {
		t.Fatal(err)
	}
	old.Close()

	st, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	defer st.Close()
	if v, _ := st.SchemaVersion(ctx); v < 2 {
		t.Fatalf("upgraded store at version %d", v)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		in := tx.In(acc.ID)
		got, err := tx.PeerByKey(ctx, p.Key)
		if err != nil || got.ID != p.ID {
			return fmt.Errorf("peer after upgrade: %+v %v", got, err)
		}
		if _, err := in.SetupKey(ctx, k.ID); err != nil {
			return fmt.Errorf("setup key after upgrade: %w", err)
		}
		// Migration 0004 gave the old account the default settings.
		// An account made before routing-peer DNS existed keeps it off
		// (the column's default); new accounts get it on, as NetBird's.
		want := account.DefaultSettings()
		want.RoutingPeerDNSResolutionEnabled = false
		if a, err := in.Account(ctx); err != nil || !reflect.DeepEqual(a.Settings, want) {
			return fmt.Errorf("account after upgrade: %+v %v", a, err)
		}
		// Migration 0003 gave the old account its All group and Default policy.
		gs, err := in.Groups(ctx)
		if err != nil || len(gs) != 1 || !gs[0].All {
			return fmt.Errorf("groups after upgrade: %+v %v", gs, err)
		}
		ps, err := in.Policies(ctx)
		if err != nil || len(ps) != 1 || !ps[0].Enabled || len(ps[0].Rules) != 1 || ps[0].Rules[0].Sources[0] != gs[0].ID {
			return fmt.Errorf("policies after upgrade: %+v %v", ps, err)
		}
		_, err = in.InsertEvent(ctx, account.Event{At: time.Now(), Activity: "upgraded"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// testConcurrentMigrate starts several stores on one empty database at
// once, as management processes starting together do.
func testConcurrentMigrate(t *testing.T, e storetest.Engine) {
	cfg := e.Config(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := store.Open(ctx, cfg)
			if err == nil {
				st.Close()
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent open: %v", err)
		}
	}
}

func testNewerSchema(t *testing.T, e storetest.Engine) {
	cfg := e.Config(t)
	st, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.InsertSetting(ctx, "x", "y") }); err != nil {
		t.Fatal(err)
	}
	st.Close()
	raw, err := store.OpenNoMigrate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.ExecForTest(ctx, raw, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	raw.Close()
	if st, err := store.Open(ctx, cfg); err == nil {
		st.Close()
		t.Fatal("a store from a newer version was opened")
	}
}

func testAccess(t *testing.T, st *store.Store) {
	a := mkAccount(t, st, "a", "100.79.0.0/16")
	b := mkAccount(t, st, "b", "100.80.0.0/16")
	g := account.Group{ID: "g1", AccountID: a.ID, Name: "devs", Peers: []account.PeerID{"p1", "p2"}}
	pol := account.Policy{ID: "pol1", AccountID: a.ID, Name: "ssh", Enabled: true, Rules: []account.Rule{{ID: "r", Enabled: true,
		Action: account.ActionAccept, Protocol: account.ProtoTCP, Ports: []uint16{22}, PortRanges: []account.PortRange{{Start: 8000, End: 8100}},
		Sources: []account.GroupID{"g1"}, Destinations: []account.GroupID{"g1"}}}}
	err := st.Tx(ctx, func(tx *store.Tx) error {
		in := tx.In(a.ID)
		if err := in.PutGroup(ctx, g); err != nil {
			return err
		}
		if err := in.PutPolicy(ctx, pol); err != nil {
			return err
		}
		g.Peers = g.Peers[:1]
		return in.PutGroup(ctx, g) // replace
	})
	if err != nil {
		t.Fatal(err)
	}
	dup := account.Group{ID: "g2", AccountID: a.ID, Name: "devs"}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(a.ID).PutGroup(ctx, dup) }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("duplicate group name: %v", err)
	}
	err = st.Read(ctx, func(tx *store.Tx) error {
		in := tx.In(a.ID)
		got, err := in.GroupByName(ctx, "devs")
		if err != nil || len(got.Peers) != 1 || got.Peers[0] != "p1" {
			return fmt.Errorf("group %+v %v", got, err)
		}
		p, err := in.Policy(ctx, "pol1")
		if err != nil || len(p.Rules) != 1 || p.Rules[0].Ports[0] != 22 || p.Rules[0].PortRanges[0].End != 8100 {
			return fmt.Errorf("policy %+v %v", p, err)
		}
		// Account b sees none of it.
		other := tx.In(b.ID)
		if _, err := other.Group(ctx, "g1"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("b read a's group: %v", err)
		}
		if _, err := other.Policy(ctx, "pol1"); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("b read a's policy: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// b cannot overwrite a's rows by ID.
	steal := account.Group{ID: "g1", AccountID: b.ID, Name: "mine"}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(b.ID).PutGroup(ctx, steal) }); err == nil {
		t.Fatal("b replaced a's group")
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(b.ID).DeletePolicy(ctx, "pol1") }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("b deleted a's policy: %v", err)
	}
}

// accountRW returns a writer that runs fn in a transaction on account acc
// and checks that it bumped the account's view revision, and a reader
// that runs fn in a read transaction on it.
func accountRW(t *testing.T, st *store.Store, acc account.ID) (write func(name string, fn func(at *store.AccountTx) error), read func(fn func(at *store.AccountTx) error)) {
	viewRev := func() uint64 {
		t.Helper()
		var rev uint64
		if err := st.Read(ctx, func(tx *store.Tx) error {
			var err error
			_, rev, err = tx.In(acc).ViewRevision(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return rev
	}
	write = func(name string, fn func(at *store.AccountTx) error) {
		t.Helper()
		r0 := viewRev()
		if err := st.Tx(ctx, func(tx *store.Tx) error { return fn(tx.In(acc)) }); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if r1 := viewRev(); r1 <= r0 {
			t.Errorf("%s: view revision %d -> %d, want a bump", name, r0, r1)
		}
	}
	read = func(fn func(at *store.AccountTx) error) {
		t.Helper()
		if err := st.Read(ctx, func(tx *store.Tx) error { return fn(tx.In(acc)) }); err != nil {
			t.Fatal(err)
		}
	}
	return write, read
}
