package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// testIdPs: upstream identity providers per account (isolated between
// accounts), their links to users, and what deletions take with them, the
// same on both engines.
func testIdPs(t *testing.T, st *store.Store) {
	a := mkAccount(t, st, "a", "100.83.0.0/16")
	b := mkAccount(t, st, "b", "100.84.0.0/16")
	now := time.Now().UTC().Truncate(time.Microsecond)
	p1 := store.IdentityProvider{ID: "p1", AccountID: a.ID, Type: "oidc", Name: "Corp", Issuer: "https://sso.example", ClientID: "c", ClientSecret: "s", CreatedAt: now}
	p2 := store.IdentityProvider{ID: "p2", AccountID: b.ID, Type: "google", Name: "G", Issuer: "https://accounts.google.com", ClientID: "g", CreatedAt: now.Add(time.Second)}
	u := account.User{ID: "u1", AccountID: a.ID, Email: "u@example.com", Role: account.RoleUser, AutoGroups: []string{}, CreatedAt: now}
	must := func(fn func(tx *store.Tx) error) {
		t.Helper()
		if err := st.Tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	must(func(tx *store.Tx) error {
		if err := tx.In(a.ID).InsertIdentityProvider(ctx, p1); err != nil {
			return err
		}
		if err := tx.In(b.ID).InsertIdentityProvider(ctx, p2); err != nil {
			return err
		}
		if err := tx.In(a.ID).InsertUser(ctx, u); err != nil {
			return err
		}
		return tx.InsertIdPLink(ctx, "p1", "sub-1", u.ID)
	})
	must(func(tx *store.Tx) error {
		got, err := tx.In(a.ID).IdentityProviders(ctx)
		if d := cmp.Diff([]store.IdentityProvider{p1}, got); err != nil || d != "" {
			t.Errorf("account a's providers: %v (-want +got):\n%s", err, d)
		}
		if _, err := tx.In(a.ID).IdentityProvider(ctx, "p2"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("another account's provider: %v", err)
		}
		all, err := tx.AllIdentityProviders(ctx, 10)
		if err != nil || len(all) != 2 || all[0].ID != "p1" {
			t.Errorf("all providers: %v %v", all, err)
		}
		if one, err := tx.AllIdentityProviders(ctx, 1); err != nil || len(one) != 1 {
			t.Errorf("limit: %v %v", one, err)
		}
		if got, err := tx.IdPLink(ctx, "p1", "sub-1"); err != nil || got != u.ID {
			t.Errorf("link: %q %v", got, err)
		}
		return nil
	})
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.InsertIdPLink(ctx, "p1", "sub-1", u.ID) }); !errors.Is(err, store.ErrConflict) {
		t.Errorf("second link of one subject: %v", err)
	}
	// Updates stay within the account.
	p1.Name, p1.ClientSecret = "Corp SSO", "s2"
	must(func(tx *store.Tx) error { return tx.In(a.ID).UpdateIdentityProvider(ctx, p1) })
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(b.ID).UpdateIdentityProvider(ctx, p1) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update through another account: %v", err)
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(b.ID).DeleteIdentityProvider(ctx, "p1") }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete through another account: %v", err)
	}
	must(func(tx *store.Tx) error {
		got, err := tx.IdentityProviderByID(ctx, "p1")
		if err != nil || got.Name != "Corp SSO" || got.ClientSecret != "s2" {
			t.Errorf("after update: %+v %v", got, err)
		}
		return nil
	})
	// Deleting the user drops its links; deleting the provider its own.
	must(func(tx *store.Tx) error { return tx.In(a.ID).DeleteUser(ctx, u.ID) })
	must(func(tx *store.Tx) error {
		if _, err := tx.IdPLink(ctx, "p1", "sub-1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("link of a deleted user: %v", err)
		}
		return nil
	})
	must(func(tx *store.Tx) error { return tx.In(a.ID).DeleteIdentityProvider(ctx, "p1") })
	must(func(tx *store.Tx) error {
		if _, err := tx.IdentityProviderByID(ctx, "p1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("deleted provider: %v", err)
		}
		return nil
	})
}
