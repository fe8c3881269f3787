package users

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/updates"
)

// TestPendingUpstreamCaps: new upstream users wait for approval, at most
// MaxPendingPerProviderHour per provider in an hour and
// MaxPendingPerAccount per account; past a cap the login is refused with
// ErrTooManyPending (a message saying what to do), nothing is stored, the
// refusal is counted; an hour later, or once an admin approves, logins
// are let in again; people already linked still log in.
func TestPendingUpstreamCaps(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		now := time.Now().UTC()
		s := New(Options{Store: st, Notify: updates.NewHub(), LocalIdP: true, Now: func() time.Time { return now }})
		owner, _, err := s.Setup(ctx, SetupInput{Email: "owner@example.com", Password: "Owner-passw0rd!", Name: "Owner"})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Tx(ctx, func(tx *store.Tx) error {
			for _, id := range []string{"up", "other"} {
				if err := tx.In(owner.AccountID).InsertIdentityProvider(ctx, store.IdentityProvider{ID: id, AccountID: owner.AccountID, Type: "oidc",
					Name: id, Issuer: "https://" + id + ".example", ClientID: "c", CreatedAt: now}); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		join := func(provider string, i int) error {
			_, err := s.JoinUpstream(ctx, owner.AccountID, UpstreamLogin{ProviderID: provider, Subject: fmt.Sprint("sub-", i),
				Email: fmt.Sprintf("p%d@%s.example", i, provider), EmailVerified: true})
			return err
		}
		pending := func() int {
			var n int
			_ = st.Read(ctx, func(tx *store.Tx) error { n, err = tx.In(owner.AccountID).PendingUserCount(ctx); return err })
			return n
		}
		for i := range MaxPendingPerProviderHour {
			if err := join("up", i); !errors.Is(err, ErrPendingApproval) {
				t.Fatalf("join %d: %v, want pending approval", i, err)
			}
		}
		err = join("up", MaxPendingPerProviderHour)
		if !errors.Is(err, ErrTooManyPending) || !strings.Contains(err.Error(), "try again later") {
			t.Fatalf("join past the hourly cap: %v", err)
		}
		if n := pending(); n != MaxPendingPerProviderHour {
			t.Fatalf("%d pending after a refused join, want %d", n, MaxPendingPerProviderHour)
		}
		if got := s.Metrics()[0].Value; got != 1 {
			t.Errorf("refusals counted %v, want 1", got)
		}
		// A person already linked is not a new user: still pending, not refused.
		if err := join("up", 0); !errors.Is(err, ErrPendingApproval) {
			t.Errorf("linked person: %v", err)
		}
		// Another provider has its own hourly budget; an hour later this one too.
		if err := join("other", 0); !errors.Is(err, ErrPendingApproval) {
			t.Errorf("other provider: %v", err)
		}
		now = now.Add(time.Hour + time.Second)
		if err := join("up", MaxPendingPerProviderHour); !errors.Is(err, ErrPendingApproval) {
			t.Errorf("an hour later: %v", err)
		}

		// The account cap: fill it up to MaxPendingPerAccount.
		have := pending()
		err = st.Tx(ctx, func(tx *store.Tx) error {
			for i := have; i < MaxPendingPerAccount; i++ {
				u := account.User{ID: account.UserID(fmt.Sprint("filler-", i)), AccountID: owner.AccountID, Email: fmt.Sprintf("f%d@x.example", i),
					Role: account.RoleUser, AutoGroups: []string{}, Issued: "jwt", CreatedAt: now.Add(-2 * time.Hour), PendingApproval: true}
				if err := tx.In(owner.AccountID).InsertUser(ctx, u); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		err = join("other", 1)
		if !errors.Is(err, ErrTooManyPending) || !strings.Contains(err.Error(), "approve or reject") {
			t.Fatalf("join past the account cap: %v", err)
		}
		if _, err := s.Approve(ctx, owner, "filler-999"); err != nil {
			t.Fatal(err)
		}
		if err := join("other", 1); !errors.Is(err, ErrPendingApproval) {
			t.Errorf("after an approval: %v", err)
		}
	})
}
