package peers_test

import (
	"context"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// TestPeerEventCodes: a peer's changes are recorded with the reference's
// codes, one per change and none for an unchanged update.
func TestPeerEventCodes(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		acc, err := tenant.Default(ctx, st, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		u := account.User{ID: "sso|dev", AccountID: acc.ID, Email: "dev@example.com", Name: "Dev", Role: account.RoleUser, AutoGroups: []string{},
			Issued: "jwt", CreatedAt: time.Now()}
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertUser(ctx, u) }); err != nil {
			t.Fatal(err)
		}
		svc := peers.New(st, nopNotifier{}, slog.New(slog.DiscardHandler), nil)
		pk, _ := key.NewPrivate()
		p, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), User: &u, Meta: account.Meta{Hostname: "laptop"}})
		if err != nil {
			t.Fatal(err)
		}
		events := func() []string {
			t.Helper()
			var es []account.Event
			if err := st.Read(ctx, func(tx *store.Tx) error { es, err = tx.In(acc.ID).Events(ctx, 0); return err }); err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, e := range es {
				if e.Target == string(p.ID) {
					out = append(out, e.Activity)
				}
			}
			slices.Sort(out)
			return out
		}
		step := func(name string, do func() error, want ...string) {
			t.Helper()
			before := events()
			if err := do(); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var added []string
			for _, c := range events() {
				if i := slices.Index(before, c); i >= 0 {
					before = slices.Delete(before, i, i+1)
				} else {
					added = append(added, c)
				}
			}
			slices.Sort(want)
			if !slices.Equal(added, want) {
				t.Errorf("%s: events %q, want %q", name, added, want)
			}
		}
		if got := events(); !slices.Equal(got, []string{"peer.user.add"}) {
			t.Errorf("registration: events %q, want peer.user.add", got)
		}
		step("SSO login again", func() error {
			_, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), User: &u, Meta: account.Meta{Hostname: "laptop"}})
			return err
		}, "user.peer.login")
		step("key-only login", func() error {
			_, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), Meta: account.Meta{Hostname: "laptop"}})
			return err
		})
		update := func(name string, expiry bool) func() error {
			return func() error {
				_, err := svc.Update(ctx, acc.ID, p.ID, peers.UpdateInput{Name: name, LoginExpiration: expiry}, string(u.ID))
				return err
			}
		}
		step("unchanged", update(p.Name, p.LoginExpirationEnabled))
		step("expiry toggled", update(p.Name, !p.LoginExpirationEnabled), map[bool]string{true: "peer.login.expiration.disable", false: "peer.login.expiration.enable"}[p.LoginExpirationEnabled])
		step("renamed and toggled back", update("laptop-2", p.LoginExpirationEnabled), "peer.rename",
			map[bool]string{true: "peer.login.expiration.enable", false: "peer.login.expiration.disable"}[p.LoginExpirationEnabled])
		step("deleted", func() error { return svc.Delete(ctx, acc.ID, p.ID, string(u.ID)) }, "user.peer.delete")
		for _, c := range events() {
			if _, ok := account.Activities[c]; !ok {
				t.Errorf("code %q is not in account.Activities", c)
			}
		}
	})
}
