package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// testRevocation: revoked subjects and access tokens, invitations and
// tokens of a user, claimed e-mail domains and the e-mail verification
// flag, the same on both engines.
func testRevocation(t *testing.T, st *store.Store) {
	a := mkAccount(t, st, "a", "100.81.0.0/16")
	b := mkAccount(t, st, "b", "100.82.0.0/16")
	now := time.Now().UTC().Truncate(time.Microsecond)
	u := account.User{ID: "u1", AccountID: a.ID, Email: "u@corp.example", EmailVerified: true, Role: account.RoleAdmin, AutoGroups: []string{}, CreatedAt: now}
	must := func(fn func(tx *store.Tx) error) {
		t.Helper()
		if err := st.Tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	must(func(tx *store.Tx) error {
		at := tx.In(a.ID)
		if err := at.InsertUser(ctx, u); err != nil {
			return err
		}
		if err := at.InsertToken(ctx, account.Token{ID: "t1", AccountID: a.ID, UserID: u.ID, Name: "t", Hash: "h1", ExpiresAt: now.Add(time.Hour), CreatedBy: u.ID, CreatedAt: now}); err != nil {
			return err
		}
		for i, by := range []account.UserID{u.ID, "someone-else"} {
			v := account.Invite{ID: account.InviteID(rune('a' + i)), AccountID: a.ID, Email: string(rune('a'+i)) + "@x.example", Name: "n", Role: account.RoleUser,
				AutoGroups: []string{}, Hash: "ih" + string(rune('a'+i)), ExpiresAt: now.Add(time.Hour), CreatedBy: by, CreatedAt: now}
			if err := at.PutInvite(ctx, v); err != nil {
				return err
			}
		}
		return nil
	})
	err := st.Read(ctx, func(tx *store.Tx) error {
		got, err := tx.UserByID(ctx, u.ID)
		if err != nil || !got.EmailVerified {
			t.Errorf("email_verified not stored: %v %v", got, err)
		}
		if _, err := tx.SubjectRevokedAt(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("revoked_at of a subject never revoked: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Revoking a subject twice moves the mark forward.
	must(func(tx *store.Tx) error { return tx.RevokeSubject(ctx, u.ID, now) })
	later := now.Add(time.Second)
	must(func(tx *store.Tx) error { return tx.RevokeSubject(ctx, u.ID, later) })
	// A revoked token, and an expired one whose row the next revocation drops.
	must(func(tx *store.Tx) error {
		return tx.RevokeAccessToken(ctx, "old", "u1", now.Add(-time.Minute), now.Add(-2*time.Minute))
	})
	must(func(tx *store.Tx) error { return tx.RevokeAccessToken(ctx, "jti", "u1", now.Add(time.Hour), now) })
	must(func(tx *store.Tx) error { return tx.RevokeAccessToken(ctx, "jti", "u1", now.Add(time.Hour), now) })
	var n int64
	must(func(tx *store.Tx) error {
		at := tx.In(a.ID)
		var err error
		if n, err = at.DeleteInvitesBy(ctx, u.ID); err != nil {
			return err
		}
		return at.DeleteTokensOf(ctx, u.ID)
	})
	err = st.Read(ctx, func(tx *store.Tx) error {
		if at, err := tx.SubjectRevokedAt(ctx, u.ID); err != nil || !at.Equal(later) {
			t.Errorf("revoked_at %v, %v; want %v", at, err, later)
		}
		for jti, want := range map[string]bool{"jti": true, "old": false, "other": false} {
			if got, err := tx.AccessTokenRevoked(ctx, jti); err != nil || got != want {
				t.Errorf("token %s revoked: %v, %v; want %v", jti, got, err, want)
			}
		}
		if vs, err := tx.In(a.ID).Invites(ctx); err != nil || n != 1 || len(vs) != 1 || vs[0].CreatedBy != "someone-else" {
			t.Errorf("invites after deleting the user's (%d): %v, %v", n, vs, err)
		}
		if ts, err := tx.In(a.ID).Tokens(ctx, u.ID); err != nil || len(ts) != 0 {
			t.Errorf("tokens after deleting the user's: %v, %v", ts, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Claimed domains: one account per domain; an unclaimed user_domain
	// (domain mode's listed domains) is not a claim.
	must(func(tx *store.Tx) error { return tx.In(b.ID).SetUserDomain(ctx, "corp.example") })
	must(func(tx *store.Tx) error { return tx.In(a.ID).ClaimDomain(ctx, "corp.example") })
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(b.ID).ClaimDomain(ctx, "corp.example") }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("second claim of a domain: %v, want ErrConflict", err)
	}
	err = st.Read(ctx, func(tx *store.Tx) error {
		if id, err := tx.AccountByClaimedDomain(ctx, "corp.example"); err != nil || id != a.ID {
			t.Errorf("claimed by %q, %v; want %q", id, err, a.ID)
		}
		if _, err := tx.AccountByClaimedDomain(ctx, "other.example"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unclaimed domain: %v", err)
		}
		if d, err := tx.In(b.ID).ClaimedDomain(ctx); err != nil || d != "" {
			t.Errorf("account b claims %q, %v", d, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	must(func(tx *store.Tx) error { return tx.In(a.ID).ClaimDomain(ctx, "") })
	must(func(tx *store.Tx) error { return tx.In(b.ID).ClaimDomain(ctx, "corp.example") })
}
