package peers_test

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
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

type nopNotifier struct{}

func (nopNotifier) AccountChanged(account.ID) {}

// TestConcurrentRegistrations races more registrations than a setup key
// allows: exactly the limit register, each use commits with its peer, and
// every peer gets its own address and DNS label.
func TestConcurrentRegistrations(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		acc, err := tenant.Default(ctx, st, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		const limit, tries = 20, 32
		k, secret, err := setupkey.New(acc.ID, setupkey.Options{Name: "burst", Reusable: true, UsageLimit: limit}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, k) }); err != nil {
			t.Fatal(err)
		}
		svc := peers.New(st, nopNotifier{}, slog.New(slog.DiscardHandler), nil)
		var (
			wg        sync.WaitGroup
			mu        sync.Mutex
			ok, spent int
		)
		for range tries {
			wg.Add(1)
			go func() {
				defer wg.Done()
				pk, _ := key.NewPrivate()
				_, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), SetupKey: secret, Meta: account.Meta{Hostname: "web"}})
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, setupkey.ErrExhausted):
					spent++
				default:
					t.Errorf("login: %v", err)
				}
			}()
		}
		wg.Wait()
		if ok != limit || spent != tries-limit {
			t.Fatalf("%d registered, %d refused; want %d and %d", ok, spent, limit, tries-limit)
		}
		err = st.Read(ctx, func(tx *store.Tx) error {
			in := tx.In(acc.ID)
			ps, err := in.Peers(ctx)
			if err != nil {
				return err
			}
			got, err := in.SetupKey(ctx, k.ID)
			if err != nil {
				return err
			}
			a, _ := in.Account(ctx)
			evs, _ := in.Events(ctx, 0)
			ips, labels := map[netip.Addr]bool{}, map[string]bool{}
			for _, p := range ps {
				ips[p.IP], labels[p.DNSLabel] = true, true
			}
			if len(ps) != limit || got.UsedTimes != limit || len(ips) != limit || len(labels) != limit || a.Serial != limit || len(evs) != limit {
				t.Errorf("%d peers, key used %d times, %d addresses, %d labels, serial %d, %d events; want %d of each",
					len(ps), got.UsedTimes, len(ips), len(labels), a.Serial, len(evs), limit)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}
