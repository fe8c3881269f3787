package peers_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// TestConnectedBursts: many streams opening and closing at once all get
// their connected state recorded (the writes are group-committed).
func TestConnectedBursts(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		acc, err := tenant.Default(ctx, st, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		k, secret, _ := setupkey.New(acc.ID, setupkey.Options{Name: "k", Reusable: true}, time.Now())
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, k) }); err != nil {
			t.Fatal(err)
		}
		svc := peers.New(st, nopNotifier{}, slog.New(slog.DiscardHandler), nil)
		const n = 60
		var ids []account.PeerID
		for i := range n {
			pk, _ := key.NewPrivate()
			p, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), SetupKey: secret, Meta: account.Meta{Hostname: fmt.Sprint("h", i)}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, p.ID)
		}
		set := func(connected bool, which []account.PeerID) {
			var wg sync.WaitGroup
			for _, id := range which {
				wg.Add(1)
				go func() {
					defer wg.Done()
					if err := svc.SetConnected(ctx, acc.ID, id, connected); err != nil {
						t.Errorf("set connected: %v", err)
					}
				}()
			}
			// A peer that is gone is not an error for the others.
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := svc.SetConnected(ctx, acc.ID, "no-such-peer", connected); err != nil {
					t.Errorf("unknown peer: %v", err)
				}
			}()
			wg.Wait()
		}
		count := func() int {
			var on int
			_ = st.Read(ctx, func(tx *store.Tx) error {
				ps, err := tx.In(acc.ID).Peers(ctx)
				for _, p := range ps {
					if p.Connected {
						on++
					}
				}
				return err
			})
			return on
		}
		set(true, ids)
		if got := count(); got != n {
			t.Fatalf("%d of %d peers connected", got, n)
		}
		set(false, ids[:n/2])
		if got := count(); got != n-n/2 {
			t.Fatalf("%d peers connected after half closed, want %d", got, n-n/2)
		}
	})
}
