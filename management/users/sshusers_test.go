package users

import (
	"context"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

func serialOf(t *testing.T, st *store.Store, acc account.ID) uint64 {
	t.Helper()
	var s uint64
	if err := st.Read(context.Background(), func(tx *store.Tx) error {
		a, err := tx.In(acc).Account(context.Background())
		s = a.Serial
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestSSHUsersBumpSerial: a user who becomes one agents' SSH servers
// accept tokens of (a first SSO login, an approval) bumps the account's
// serial, so that peers get a map with the new sshAuth; a user still
// waiting for approval does not.
func TestSSHUsersBumpSerial(t *testing.T) {
	s, st := newService(t, Options{Mode: DomainAccounts, AccountDomains: []string{"a.example"}})
	ctx := context.Background()
	now := time.Now()
	owner := mustClaims(t, s, claims("o", "o@a.example", true, now))
	acc := owner.AccountID

	before := serialOf(t, st, acc)
	mustClaims(t, s, claims("j", "j@a.example", true, now))
	if got := serialOf(t, st, acc); got <= before {
		t.Fatalf("first SSO login: serial %d -> %d, want bumped", before, got)
	}

	requireApproval(t, st, acc, true)
	before = serialOf(t, st, acc)
	if _, err := s.FromClaims(ctx, claims("p", "p@a.example", true, now)); err == nil {
		t.Fatal("domain joiner not pending")
	}
	if got := serialOf(t, st, acc); got != before {
		t.Fatalf("pending joiner: serial %d -> %d, want unchanged", before, got)
	}
	if _, err := s.Approve(ctx, owner, "p"); err != nil {
		t.Fatal(err)
	}
	if got := serialOf(t, st, acc); got <= before {
		t.Fatalf("approval: serial %d -> %d, want bumped", before, got)
	}
}
