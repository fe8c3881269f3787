package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// Connected state across management instances: a late close from an
// instance the peer left does not mark it offline, and the peers of an
// instance that stopped beating are offline once it is reaped.
func TestInstances(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		acc := mkAccount(t, st, "a", "100.70.0.0/16")
		p1, p2 := mkPeer(t, acc, 1), mkPeer(t, acc, 2)
		p2.IP = p1.IP.Next()
		insertPeer(t, st, p1)
		insertPeer(t, st, p2)
		tx := func(fn func(tx *store.Tx) error) {
			t.Helper()
			if err := st.Tx(ctx, fn); err != nil {
				t.Fatal(err)
			}
		}
		connected := func(id account.PeerID) bool {
			t.Helper()
			var p account.Peer
			if err := st.Read(ctx, func(tx *store.Tx) (err error) { p, err = tx.In(acc.ID).Peer(ctx, id); return }); err != nil {
				t.Fatal(err)
			}
			return p.Connected
		}
		now := time.Now().UnixNano()
		beat := func(id string, at int64) bool {
			t.Helper()
			var registered bool
			tx(func(tx *store.Tx) (err error) { registered, err = tx.Heartbeat(ctx, id, at); return })
			return registered
		}
		if !beat("i1", now) || !beat("i2", now) || beat("i1", now) {
			t.Fatal("first beats must register, later ones not")
		}
		tx(func(tx *store.Tx) error { return tx.In(acc.ID).SetPeerConnected(ctx, p1.ID, true, now, "i1") })
		tx(func(tx *store.Tx) error { return tx.In(acc.ID).SetPeerConnected(ctx, p2.ID, true, now, "i1") })
		// p1 reconnects on i2, then i1 notices its old stream closed.
		tx(func(tx *store.Tx) error { return tx.In(acc.ID).SetPeerConnected(ctx, p1.ID, true, now, "i2") })
		err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).SetPeerConnected(ctx, p1.ID, false, now, "i1") })
		if !errors.Is(err, store.ErrNotFound) || !connected(p1.ID) {
			t.Fatalf("late close from the old instance: err %v, connected %v", err, connected(p1.ID))
		}
		// Both alive: reaping changes nothing.
		var n int64
		tx(func(tx *store.Tx) (err error) { n, err = tx.ReapInstances(ctx, now-1, now); return })
		if n != 0 || !connected(p1.ID) || !connected(p2.ID) {
			t.Fatalf("live instances reaped %d", n)
		}
		// i1 stops beating; i2 goes on.
		later := now + int64(20*time.Second)
		beat("i2", later)
		tx(func(tx *store.Tx) (err error) {
			n, err = tx.ReapInstances(ctx, later-int64(15*time.Second), later)
			return
		})
		if n != 1 || !connected(p1.ID) || connected(p2.ID) {
			t.Fatalf("reaped %d; p1 (on i2) %v, p2 (on dead i1) %v", n, connected(p1.ID), connected(p2.ID))
		}
		// i1 was only slow: its next beat registers it again (and it
		// records its peers again).
		if !beat("i1", later) {
			t.Fatal("a reaped instance's beat must say it registered again")
		}
		// A clean stop of i2 takes its peers offline at once.
		tx(func(tx *store.Tx) error { return tx.RemoveInstance(ctx, "i2", later) })
		if connected(p1.ID) {
			t.Fatal("peer of a removed instance still connected")
		}
	})
}

// On Postgres every committed serial bump is announced to listeners (and
// an aborted one is not); SQLite says it cannot.
func TestChangeNotifications(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		acc := mkAccount(t, st, "a", "100.70.0.0/16")
		lctx, cancel := context.WithCancel(ctx)
		defer cancel()
		type change struct {
			id     account.ID
			serial uint64
		}
		got := make(chan change, 10)
		ready := make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- st.Listen(lctx, func() { close(ready) }, func(id account.ID, s uint64) { got <- change{id, s} })
		}()
		if e.Name == store.SQLite {
			if err := <-done; !errors.Is(err, store.ErrNoListen) {
				t.Fatalf("sqlite listen: %v", err)
			}
			return
		}
		select {
		case <-ready:
		case err := <-done:
			t.Fatal(err)
		}
		_ = st.Tx(ctx, func(tx *store.Tx) error {
			if _, err := tx.In(acc.ID).BumpSerial(ctx); err != nil {
				return err
			}
			return errors.New("abort")
		})
		var serial uint64
		if err := st.Tx(ctx, func(tx *store.Tx) (err error) { serial, err = tx.In(acc.ID).BumpSerial(ctx); return }); err != nil {
			t.Fatal(err)
		}
		select {
		case c := <-got:
			if c.id != acc.ID || c.serial != serial {
				t.Fatalf("got %+v, want %s at %d (an aborted bump must not be announced)", c, acc.ID, serial)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("no notification")
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("listen after cancel: %v", err)
		}
	})
}

func FuzzParseChange(f *testing.F) {
	for _, s := range []string{"1:acc", "18446744073709551615:x", ":", "x:y", "1:", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, _, err := store.ParseChange(s)
		if err == nil && id == "" {
			t.Fatalf("%q parsed to an empty account", s)
		}
	})
}
