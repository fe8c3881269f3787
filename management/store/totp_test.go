package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// testTOTP: second factors by subject, steps accepted once, and the
// factor going with its local login, the same on both engines.
func testTOTP(t *testing.T, st *store.Store) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	f := store.TOTPFactor{Subject: "s1", Secret: "ABC", Recovery: []string{}, CreatedAt: now}
	must := func(fn func(tx *store.Tx) error) {
		t.Helper()
		if err := st.Tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	must(func(tx *store.Tx) error { return tx.PutTOTPFactor(ctx, f) })
	// Unconfirmed, no step is accepted.
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.UseTOTPStep(ctx, "s1", 5) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("step of an unconfirmed factor: %v", err)
	}
	f.Confirmed, f.Recovery, f.LastStep = true, []string{"h1", "h2"}, 3
	must(func(tx *store.Tx) error { return tx.PutTOTPFactor(ctx, f) })
	must(func(tx *store.Tx) error { return tx.UseTOTPStep(ctx, "s1", 5) })
	for _, step := range []int64{5, 4} {
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.UseTOTPStep(ctx, "s1", step) }); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("step %d after 5: %v", step, err)
		}
	}
	must(func(tx *store.Tx) error {
		got, err := tx.TOTPFactor(ctx, "s1")
		f.LastStep = 5
		if d := cmp.Diff(f, got); err != nil || d != "" {
			t.Errorf("read back: %v (-want +got):\n%s", err, d)
		}
		return nil
	})
	// Deleting the local login deletes its factor.
	must(func(tx *store.Tx) error {
		return tx.InsertCredential(ctx, account.Credential{Subject: "s1", Email: "s1@example.com", Name: "S", PasswordHash: "x", CreatedAt: now})
	})
	must(func(tx *store.Tx) error { return tx.DeleteCredential(ctx, "s1") })
	must(func(tx *store.Tx) error {
		if _, err := tx.TOTPFactor(ctx, "s1"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("factor after its login was deleted: %v", err)
		}
		return nil
	})
}
