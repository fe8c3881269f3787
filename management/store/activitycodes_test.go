package store_test

import (
	"fmt"
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
		// The account row as that schema holds it (InsertAccount writes
		// today's columns).
		if err := store.ExecForTest(ctx, old, `INSERT INTO accounts (id, domain, network, serial, created_at) VALUES ('a', 'netbird.selfhosted', '100.78.0.0/16', 0, 1)`); err != nil {
			t.Fatal(err)
		}
		acc := account.Account{ID: "a"}
		for i, code := range []string{"peer.add", "peer.delete", "peer.rename"} {
			q := fmt.Sprintf(`INSERT INTO events (account_id, seq, at, activity, target) VALUES ('a', %d, %d, '%s', 'p1')`, i+1, time.Now().UnixNano(), code)
			if err := store.ExecForTest(ctx, old, q); err != nil {
				t.Fatal(err)
			}
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
