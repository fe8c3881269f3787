package store_test

import (
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestActivityCodesMigrated: events stored with the codes of before
// migration 0011 read back with the reference's codes; others unchanged.
func TestActivityCodesMigrated(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		cfg := e.Config(t)
		old, err := store.OpenNoMigrate(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.MigrateTo(ctx, old, 10); err != nil {
			t.Fatal(err)
		}
		acc := mkAccount(t, old, "a", "100.78.0.0/16")
		err = old.Tx(ctx, func(tx *store.Tx) error {
			for _, code := range []string{"peer.add", "peer.delete", "peer.rename"} {
				if _, err := tx.In(acc.ID).InsertEvent(ctx, account.Event{At: time.Now(), Activity: code, Target: "p1"}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		old.Close()

		st, err := store.Open(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var es []account.Event
		if err := st.Read(ctx, func(tx *store.Tx) error { es, err = tx.In(acc.ID).Events(ctx, 0); return err }); err != nil {
			t.Fatal(err)
		}
		got := map[string]bool{}
		for _, ev := range es {
			got[ev.Activity] = true
		}
		for _, want := range []string{"peer.setupkey.add", "user.peer.delete", "peer.rename"} {
			if !got[want] {
				t.Errorf("after the upgrade: codes %v, want %s among them", got, want)
			}
		}
		if got["peer.add"] || got["peer.delete"] {
			t.Errorf("old codes left after the upgrade: %v", got)
		}
	})
}
