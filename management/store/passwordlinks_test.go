package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// testPasswordLinks: one link per user, found by hash in any account,
// replaced (the old hash stops matching), deleted only when it is still
// the one asked for, kept within its account, and gone with its user.
func testPasswordLinks(t *testing.T, st *store.Store) {
	a := mkAccount(t, st, "a", "100.83.0.0/16")
	b := mkAccount(t, st, "b", "100.84.0.0/16")
	now := time.Now().UTC().Truncate(time.Microsecond)
	u := account.User{ID: "u1", AccountID: a.ID, Email: "u@example.com", Role: account.RoleUser, AutoGroups: []string{}, Issued: "api", CreatedAt: now}
	l := store.PasswordLink{Subject: u.ID, AccountID: a.ID, Hash: "h1", ExpiresAt: now.Add(time.Hour), CreatedBy: "owner", CreatedAt: now}
	tx := func(fn func(tx *store.Tx) error) error { return st.Tx(ctx, fn) }
	if err := tx(func(tx *store.Tx) error {
		if err := tx.In(a.ID).InsertUser(ctx, u); err != nil {
			return err
		}
		return tx.In(a.ID).PutPasswordLink(ctx, l)
	}); err != nil {
		t.Fatal(err)
	}
	byHash := func(h string) (store.PasswordLink, error) {
		var got store.PasswordLink
		err := st.Read(ctx, func(tx *store.Tx) error {
			var err error
			got, err = tx.PasswordLinkByHash(ctx, h)
			return err
		})
		return got, err
	}
	if got, err := byHash("h1"); err != nil || got != l {
		t.Fatalf("by hash: %+v, %v; want %+v", got, err, l)
	}
	// Another account may neither store nor see it.
	if err := tx(func(tx *store.Tx) error { return tx.In(b.ID).PutPasswordLink(ctx, l) }); err == nil {
		t.Fatal("account b stored account a's link")
	}
	if err := tx(func(tx *store.Tx) error { _, err := tx.In(b.ID).PasswordLinkOf(ctx, u.ID); return err }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("account b sees the link: %v", err)
	}
	// A new link replaces the old.
	l2 := l
	l2.Hash, l2.ExpiresAt = "h2", now.Add(2*time.Hour)
	if err := tx(func(tx *store.Tx) error { return tx.In(a.ID).PutPasswordLink(ctx, l2) }); err != nil {
		t.Fatal(err)
	}
	if _, err := byHash("h1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("old hash after replacement: %v", err)
	}
	if got, err := byHash("h2"); err != nil || got != l2 {
		t.Fatalf("new link %+v, %v", got, err)
	}
	// Deleting a link that is no longer the current one does nothing.
	if err := tx(func(tx *store.Tx) error { return tx.In(a.ID).DeletePasswordLink(ctx, u.ID, "h1") }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("delete of a replaced link: %v", err)
	}
	if _, err := byHash("h2"); err != nil {
		t.Fatalf("current link gone: %v", err)
	}
	if err := tx(func(tx *store.Tx) error { return tx.In(a.ID).DeletePasswordLink(ctx, u.ID, "h2") }); err != nil {
		t.Fatal(err)
	}
	if _, err := byHash("h2"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("deleted link: %v", err)
	}
	// It goes with its user.
	if err := tx(func(tx *store.Tx) error {
		if err := tx.In(a.ID).PutPasswordLink(ctx, l); err != nil {
			return err
		}
		return tx.In(a.ID).DeleteUser(ctx, u.ID)
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := byHash("h1"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("link of a deleted user: %v", err)
	}
}
