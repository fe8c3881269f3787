package peers_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// clock is a settable time source.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

type countNotifier struct {
	mu sync.Mutex
	n  map[account.ID]int
}

func (c *countNotifier) AccountChanged(id account.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[id]++
}

// TestInactivityExpiration: a peer added through SSO that stays
// disconnected longer than the account's inactivity expiration must log
// in again; the sweeper announces it once; connected peers, setup-key
// peers and accounts without the setting are not affected.
func TestInactivityExpiration(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		clk := &clock{t: time.Now().UTC().Truncate(time.Second)}
		acc, err := tenant.Default(ctx, st, clk.now())
		if err != nil {
			t.Fatal(err)
		}
		u := account.User{ID: "u|1", AccountID: acc.ID, Role: account.RoleAdmin, AutoGroups: []string{}, Issued: "jwt", CreatedAt: clk.now()}
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertUser(ctx, u) }); err != nil {
			t.Fatal(err)
		}
		n := &countNotifier{n: map[account.ID]int{}}
		svc := peers.New(st, n, slog.New(slog.DiscardHandler), clk.now)
		pk, _ := key.NewPrivate()
		p, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), User: &u, Meta: account.Meta{Hostname: "laptop"}})
		if err != nil {
			t.Fatal(err)
		}
		set := account.DefaultSettings()
		set.PeerLoginExpiration = account.MaxLoginExpiration
		set.PeerInactivityExpirationEnabled, set.PeerInactivityExpiration = true, 600
		if _, err := svc.UpdateAccount(ctx, acc.ID, peers.AccountUpdate{Settings: set}, "test"); err != nil {
			t.Fatal(err)
		}
		since := clk.now()
		seen := map[account.PeerID]time.Time{}
		serial := func() uint64 {
			var a account.Account
			_ = st.Read(ctx, func(tx *store.Tx) error { a, err = tx.In(acc.ID).Account(ctx); return err })
			return a.Serial
		}
		// Connected for a long time: never inactive.
		if err := svc.SetConnected(ctx, acc.ID, p.ID, true); err != nil {
			t.Fatal(err)
		}
		clk.add(time.Hour)
		if _, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), Meta: account.Meta{Hostname: "laptop"}}); err != nil {
			t.Fatalf("connected peer refused: %v", err)
		}
		// Disconnected 5 minutes: still fine; 11 minutes: log in again.
		if err := svc.SetConnected(ctx, acc.ID, p.ID, false); err != nil {
			t.Fatal(err)
		}
		clk.add(5 * time.Minute)
		if _, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), Meta: account.Meta{Hostname: "laptop"}}); err != nil {
			t.Fatalf("briefly away peer refused: %v", err)
		}
		before := serial()
		if err := svc.ExpireInactive(ctx, since, seen); err != nil || serial() != before {
			t.Fatalf("sweep before the deadline: %v, serial %d -> %d", err, before, serial())
		}
		since = clk.now()
		clk.add(6 * time.Minute)
		if _, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), Meta: account.Meta{Hostname: "laptop"}}); !errors.Is(err, peers.ErrLoginExpired) {
			t.Fatalf("inactive peer: %v, want %v", err, peers.ErrLoginExpired)
		}
		if err := svc.ExpireInactive(ctx, since, seen); err != nil || serial() != before+1 {
			t.Fatalf("sweep after the deadline: %v, serial %d -> %d", err, before, serial())
		}
		if err := svc.ExpireInactive(ctx, since, seen); err != nil || serial() != before+1 {
			t.Fatalf("second sweep announced again: %v, serial %d", err, serial())
		}
		// An SSO login brings it back.
		if _, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), User: &u, Meta: account.Meta{Hostname: "laptop"}}); err != nil {
			t.Fatalf("SSO login of the inactive peer: %v", err)
		}
		if _, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), Meta: account.Meta{Hostname: "laptop"}}); err != nil {
			t.Fatalf("after the SSO login: %v", err)
		}
		// The setting off: no expiry.
		set.PeerInactivityExpirationEnabled = false
		if _, err := svc.UpdateAccount(ctx, acc.ID, peers.AccountUpdate{Settings: set}, "test"); err != nil {
			t.Fatal(err)
		}
		clk.add(48 * time.Hour)
		if _, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), Meta: account.Meta{Hostname: "laptop"}}); err != nil {
			t.Fatalf("inactivity off: %v", err)
		}
	})
}
