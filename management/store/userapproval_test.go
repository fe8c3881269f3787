package store_test

import (
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// testUserApproval: a user's pending approval is stored, read back by
// every lookup and cleared by an update.
func testUserApproval(t *testing.T, st *store.Store) {
	a := mkAccount(t, st, "a", "100.83.0.0/16")
	u := account.User{ID: "pending", AccountID: a.ID, Email: "p@example.com", Role: account.RoleUser, AutoGroups: []string{}, Issued: "jwt",
		CreatedAt: time.Now().UTC(), PendingApproval: true}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(a.ID).InsertUser(ctx, u) }); err != nil {
		t.Fatal(err)
	}
	read := func() (byID, inAcc account.User, all []account.User) {
		t.Helper()
		err := st.Read(ctx, func(tx *store.Tx) error {
			var err error
			if byID, err = tx.UserByID(ctx, u.ID); err != nil {
				return err
			}
			if inAcc, err = tx.In(a.ID).User(ctx, u.ID); err != nil {
				return err
			}
			all, err = tx.In(a.ID).Users(ctx)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return byID, inAcc, all
	}
	byID, inAcc, all := read()
	if !byID.PendingApproval || !inAcc.PendingApproval || len(all) != 1 || !all[0].PendingApproval {
		t.Fatalf("pending user read back as %+v / %+v / %+v", byID, inAcc, all)
	}
	u.PendingApproval = false
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(a.ID).UpdateUser(ctx, u) }); err != nil {
		t.Fatal(err)
	}
	if byID, _, _ = read(); byID.PendingApproval {
		t.Fatalf("approved user still pending: %+v", byID)
	}
}
