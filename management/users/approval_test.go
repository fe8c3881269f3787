package users

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// requireApproval turns the account's user approval on or off.
func requireApproval(t *testing.T, st *store.Store, acc account.ID, on bool) {
	t.Helper()
	err := st.Tx(context.Background(), func(tx *store.Tx) error {
		at := tx.In(acc)
		a, err := at.Account(context.Background())
		if err != nil {
			return err
		}
		a.Settings.Extra.UserApprovalRequired = on
		return at.UpdateSettings(context.Background(), a.Settings)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestUserApproval: only a user joining someone else's account by domain
// waits; approval and rejection apply to pending users only and need the
// role; the domain's first user (the owner) and single-account mode never
// wait.
func TestUserApproval(t *testing.T) {
	s, st := newService(t, Options{Mode: DomainAccounts, AccountDomains: []string{"a.example"}})
	ctx := context.Background()
	now := time.Now()
	owner := mustClaims(t, s, claims("o", "o@a.example", true, now))
	requireApproval(t, st, owner.AccountID, true)
	// A user of its own account (unlisted domain) is its owner: no wait.
	mustClaims(t, s, claims("x", "x@other.example", true, now))

	if _, err := s.FromClaims(ctx, claims("p", "p@a.example", true, now)); !errors.Is(err, ErrPendingApproval) {
		t.Fatalf("domain joiner: %v, want ErrPendingApproval", err)
	}
	if _, err := s.FromClaims(ctx, claims("p", "p@a.example", true, now)); !errors.Is(err, ErrPendingApproval) {
		t.Fatalf("pending user's second request: %v, want ErrPendingApproval", err)
	}
	if _, err := s.FromClaims(ctx, claims("q", "q@a.example", true, now)); !errors.Is(err, ErrPendingApproval) {
		t.Fatal(err)
	}
	auditor := account.User{ID: "aud", AccountID: owner.AccountID, Role: account.RoleAuditor}
	if _, err := s.Approve(ctx, auditor, "p"); !errors.Is(err, ErrForbidden) {
		t.Fatalf("auditor approves: %v, want ErrForbidden", err)
	}
	if _, err := s.Approve(ctx, owner, "o"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("approving a user not pending: %v, want ErrInvalid", err)
	}
	if err := s.ResendInvite(ctx, owner, "p"); !errors.Is(err, ErrNoInviteDelivery) {
		t.Fatalf("resend invite: %v", err)
	}
	if u, err := s.Approve(ctx, owner, "p"); err != nil || u.PendingApproval {
		t.Fatalf("approve: %+v %v", u, err)
	}
	if u := mustClaims(t, s, claims("p", "p@a.example", true, now)); u.PendingApproval || u.Role != account.RoleUser {
		t.Fatalf("approved user %+v", u)
	}
	if err := s.Reject(ctx, owner, "p"); !errors.Is(err, ErrInvalid) {
		t.Fatalf("rejecting an approved user: %v, want ErrInvalid", err)
	}
	if err := s.Reject(ctx, owner, "q"); err != nil {
		t.Fatal(err)
	}
	if userExists(t, st, "q") {
		t.Fatal("rejected user kept")
	}
	if err := s.ResendInvite(ctx, owner, "nobody"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("resend to nobody: %v", err)
	}

	// Off again: joiners are active at once.
	requireApproval(t, st, owner.AccountID, false)
	if u := mustClaims(t, s, claims("r", "r@a.example", true, now)); u.PendingApproval {
		t.Fatal("joined pending with approval off")
	}
}
