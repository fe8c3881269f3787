package users

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/updates"
)

func newService(t *testing.T, o Options) (*Service, *store.Store) {
	t.Helper()
	st, err := store.Open(context.Background(), store.Config{Engine: store.SQLite, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	o.Store, o.Notify = st, updates.NewHub()
	return New(o), st
}

// claims are a token's claims, issued at iat.
func claims(sub, email string, verified bool, iat time.Time) auth.Claims {
	return auth.Claims{Subject: sub, Email: email, EmailVerified: verified, Name: sub, IssuedAt: iat.Truncate(time.Second)}
}

func userExists(t *testing.T, st *store.Store, id account.UserID) bool {
	t.Helper()
	err := st.Read(context.Background(), func(tx *store.Tx) error {
		_, err := tx.UserByID(context.Background(), id)
		return err
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		t.Fatal(err)
	}
	return err == nil
}

func mustClaims(t *testing.T, s *Service, c auth.Claims) account.User {
	t.Helper()
	u, err := s.FromClaims(context.Background(), c)
	if err != nil {
		t.Fatalf("FromClaims(%s): %v", c.Subject, err)
	}
	return u
}

// TestDeletedUserOldTokenDoesNotRecreate: an external IdP's token issued
// before the user was deleted neither works nor creates the user again; a
// token issued after the deletion (a new login at the IdP) does.
func TestDeletedUserOldTokenDoesNotRecreate(t *testing.T) {
	s, st := newService(t, Options{})
	ctx := context.Background()
	old := time.Now().Add(-time.Minute)
	owner := mustClaims(t, s, claims("owner", "o@example.com", true, old))
	bob := mustClaims(t, s, claims("bob", "bob@example.com", true, old))
	if err := s.Delete(ctx, owner, bob.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FromClaims(ctx, claims("bob", "bob@example.com", true, old)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("old token of a deleted user: %v, want ErrUnauthenticated", err)
	}
	if userExists(t, st, bob.ID) {
		t.Fatal("an old token created the deleted user again")
	}
	time.Sleep(1100 * time.Millisecond) // token times are whole seconds
	if u := mustClaims(t, s, claims("bob", "bob@example.com", true, time.Now())); u.Role != account.RoleUser {
		t.Fatalf("new login after deletion: role %s", u.Role)
	}
}

// TestBuiltInTokensNeverCreateUsers: with the built-in provider, users
// exist before they log in; an unknown subject is refused.
func TestBuiltInTokensNeverCreateUsers(t *testing.T) {
	s, st := newService(t, Options{LocalIdP: true})
	if _, err := s.FromClaims(context.Background(), claims("ghost", "g@example.com", true, time.Now())); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("unknown subject: %v, want ErrUnauthenticated", err)
	}
	if userExists(t, st, "ghost") {
		t.Fatal("a built-in token created a user")
	}
}

// TestBlockVoidsEarlierTokens: after block and unblock, a token from before
// the block stays refused.
func TestBlockVoidsEarlierTokens(t *testing.T) {
	s, _ := newService(t, Options{})
	ctx := context.Background()
	old := time.Now().Add(-time.Minute)
	owner := mustClaims(t, s, claims("owner", "o@example.com", true, old))
	mustClaims(t, s, claims("bob", "bob@example.com", true, old))
	for _, blocked := range []bool{true, false} {
		if _, err := s.Update(ctx, owner, "bob", UpdateInput{Role: account.RoleUser, Blocked: blocked}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.FromClaims(ctx, claims("bob", "bob@example.com", true, old)); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("token from before the block: %v, want ErrUnauthenticated", err)
	}
}

// TestRevokedAccessTokenRefused: a jti the built-in provider revoked is
// refused by every service sharing the store.
func TestRevokedAccessTokenRefused(t *testing.T) {
	s, st := newService(t, Options{})
	ctx := context.Background()
	c := claims("owner", "o@example.com", true, time.Now())
	c.TokenID = "jti-1"
	mustClaims(t, s, c)
	if err := st.Tx(ctx, func(tx *store.Tx) error {
		return tx.RevokeAccessToken(ctx, "jti-1", "owner", time.Now().Add(time.Hour), time.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.FromClaims(ctx, c); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("revoked token: %v, want ErrUnauthenticated", err)
	}
	c.TokenID = "jti-2"
	mustClaims(t, s, c)
}

// TestDeleteWithdrawsInvites: invitations a deleted admin created stop
// working, so it cannot let itself back in.
func TestDeleteWithdrawsInvites(t *testing.T) {
	s, _ := newService(t, Options{LocalIdP: true})
	ctx := context.Background()
	owner, _, err := s.Setup(ctx, SetupInput{Email: "o@example.com", Password: "Owner-pass1!", Name: "O"})
	if err != nil {
		t.Fatal(err)
	}
	admin, pw, err := s.Create(ctx, owner, CreateInput{Email: "a@example.com", Name: "A", Role: account.RoleAdmin})
	if err != nil || pw == "" {
		t.Fatal(err)
	}
	_, token, err := s.CreateInvite(ctx, admin, InviteInput{Email: "accomplice@example.net", Name: "X", Role: account.RoleAdmin})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, owner, admin.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AcceptInvite(ctx, token, "Str0ng!pass"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("invite of a deleted admin: %v, want ErrNotFound", err)
	}
}

// TestDomainAccounts: only verified addresses group, and only in listed
// or claimed domains.
func TestDomainAccounts(t *testing.T) {
	ctx := context.Background()
	t.Run("unlisted domain", func(t *testing.T) {
		s, _ := newService(t, Options{Mode: DomainAccounts})
		a := mustClaims(t, s, claims("alice", "alice@corp.example", true, time.Now()))
		m := mustClaims(t, s, claims("mallory", "mallory@corp.example", true, time.Now()))
		if a.AccountID == m.AccountID || m.Role != account.RoleOwner {
			t.Fatalf("two users of an unlisted domain share an account (mallory is %s)", m.Role)
		}
	})
	t.Run("listed domain", func(t *testing.T) {
		s, _ := newService(t, Options{Mode: DomainAccounts, AccountDomains: []string{"corp.example"}})
		a := mustClaims(t, s, claims("alice", "alice@corp.example", true, time.Now()))
		b := mustClaims(t, s, claims("bob", "Bob@Corp.Example", true, time.Now()))
		e := mustClaims(t, s, claims("eve", "eve@corp.example", false, time.Now()))
		if a.AccountID != b.AccountID || a.Role != account.RoleOwner || b.Role != account.RoleUser {
			t.Fatalf("verified users of a listed domain: %v %v", a, b)
		}
		if e.AccountID == a.AccountID || e.Role != account.RoleOwner {
			t.Fatal("an unverified address joined the domain's account")
		}
	})
	t.Run("claimed domain", func(t *testing.T) {
		s, _ := newService(t, Options{Mode: DomainAccounts})
		a := mustClaims(t, s, claims("alice", "alice@corp.example", true, time.Now()))
		u := mustClaims(t, s, claims("unverified", "boss@corp.example", false, time.Now()))
		g := mustClaims(t, s, claims("gmail", "someone@gmail.com", true, time.Now()))
		m := mustClaims(t, s, claims("mallory", "mallory@corp.example", true, time.Now()))
		for _, c := range []struct {
			who    account.User
			domain string
			want   error
		}{
			{a, "gmail.com", ErrInvalid},
			{a, "other.example", ErrForbidden},
			{a, "not a domain", ErrInvalid},
			{u, "corp.example", ErrForbidden},
			{g, "gmail.com", ErrInvalid},
		} {
			if err := s.ClaimDomain(ctx, c.who, c.domain); !errors.Is(err, c.want) {
				t.Errorf("%s claims %q: %v, want %v", c.who.ID, c.domain, err, c.want)
			}
		}
		if err := s.ClaimDomain(ctx, a, "corp.example"); err != nil {
			t.Fatal(err)
		}
		if d, err := s.ClaimedDomain(ctx, a); err != nil || d != "corp.example" {
			t.Fatalf("claimed domain %q, %v", d, err)
		}
		b := mustClaims(t, s, claims("bob", "bob@corp.example", true, time.Now()))
		e := mustClaims(t, s, claims("eve", "eve@corp.example", false, time.Now()))
		if b.AccountID != a.AccountID || b.Role != account.RoleUser {
			t.Fatalf("verified address of a claimed domain: %v", b)
		}
		if e.AccountID == a.AccountID {
			t.Fatal("an unverified address joined the claiming account")
		}
		// Another account of the same domain cannot take the claim.
		if m.AccountID == a.AccountID {
			t.Fatal("mallory joined alice's account before the claim")
		}
		if err := s.ClaimDomain(ctx, m, "corp.example"); !errors.Is(err, ErrConflict) {
			t.Fatalf("second claim: %v, want ErrConflict", err)
		}
	})
}

// countingHash wraps the service's bcrypt so that tests see when it runs.
func countingHash(s *Service) *atomic.Int32 {
	var n atomic.Int32
	real := s.hash
	s.hash = func(pw string) (string, error) { n.Add(1); return real(pw) }
	return &n
}

// TestCheapChecksBeforeHashing: unauthenticated requests that fail on a
// cheap check never run bcrypt.
func TestCheapChecksBeforeHashing(t *testing.T) {
	s, _ := newService(t, Options{LocalIdP: true})
	ctx := context.Background()
	if _, _, err := s.Setup(ctx, SetupInput{Email: "o@example.com", Password: "Owner-pass1!", Name: "O"}); err != nil {
		t.Fatal(err)
	}
	n := countingHash(s)
	if _, _, err := s.Setup(ctx, SetupInput{Email: "x@example.com", Password: "Other-pass1!", Name: "X"}); !errors.Is(err, ErrSetupDone) {
		t.Fatalf("second setup: %v", err)
	}
	if _, err := s.AcceptInvite(ctx, "nbi_guessed", "Str0ng!pass"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown invite: %v", err)
	}
	if got := n.Load(); got != 0 {
		t.Fatalf("bcrypt ran %d times for requests refused by cheap checks", got)
	}
}

// TestOnePasswordPolicy: setup applies the same rules as invitations.
func TestOnePasswordPolicy(t *testing.T) {
	s, _ := newService(t, Options{LocalIdP: true})
	for _, pw := range []string{"owner-password", "Sh0rt!", "UPPER-LOWER-NO-DIGIT", string(make([]byte, 73))} {
		if _, _, err := s.Setup(context.Background(), SetupInput{Email: "o@example.com", Password: pw}); !errors.Is(err, ErrInvalid) {
			t.Errorf("setup with password %q: %v, want ErrInvalid", pw, err)
		}
	}
}

// TestPasswordChangeHashesOutsideTransaction: while bcrypt runs for a
// password change, other writes to the store go through.
func TestPasswordChangeHashesOutsideTransaction(t *testing.T) {
	s, st := newService(t, Options{LocalIdP: true})
	ctx := context.Background()
	owner, _, err := s.Setup(ctx, SetupInput{Email: "o@example.com", Password: "Owner-pass1!", Name: "O"})
	if err != nil {
		t.Fatal(err)
	}
	var stalled atomic.Int32
	probe := func() {
		done := make(chan error, 1)
		go func() {
			done <- st.Tx(ctx, func(tx *store.Tx) error {
				return tx.In(owner.AccountID).UpdateUser(ctx, owner)
			})
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Error(err)
			}
		case <-time.After(2 * time.Second):
			stalled.Add(1)
			<-done
		}
	}
	realHash, realCompare := s.hash, s.compare
	s.hash = func(pw string) (string, error) { probe(); return realHash(pw) }
	s.compare = func(h, pw string) error { probe(); return realCompare(h, pw) }
	if err := s.ChangePassword(ctx, owner, owner.ID, "Owner-pass1!", "New-pass2?"); err != nil {
		t.Fatal(err)
	}
	if n := stalled.Load(); n != 0 {
		t.Fatalf("%d writes stalled behind bcrypt inside the password change's transaction", n)
	}
}

// TestOldPasswordGuessesLimited: after 5 wrong old passwords, even the
// right one is refused for a while.
func TestOldPasswordGuessesLimited(t *testing.T) {
	now := time.Now()
	s, _ := newService(t, Options{LocalIdP: true, Now: func() time.Time { return now }})
	ctx := context.Background()
	owner, _, err := s.Setup(ctx, SetupInput{Email: "o@example.com", Password: "Owner-pass1!", Name: "O"})
	if err != nil {
		t.Fatal(err)
	}
	s.compare = func(h, pw string) error { // the real check, at a test's pace
		if pw == "Owner-pass1!" {
			return nil
		}
		return errors.New("mismatch")
	}
	for i := range passwordBurst {
		if err := s.ChangePassword(ctx, owner, owner.ID, "guess", "New-pass2?"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("guess %d: %v", i, err)
		}
	}
	if err := s.ChangePassword(ctx, owner, owner.ID, "Owner-pass1!", "New-pass2?"); !errors.Is(err, ErrTooManyAttempts) {
		t.Fatalf("after %d wrong guesses: %v, want ErrTooManyAttempts", passwordBurst, err)
	}
	now = now.Add(passwordRefill)
	if err := s.ChangePassword(ctx, owner, owner.ID, "Owner-pass1!", "New-pass2?"); err != nil {
		t.Fatalf("after waiting: %v", err)
	}
}

// TestEmailMustBeBare: display-name forms are refused everywhere an
// address is stored.
func TestEmailMustBeBare(t *testing.T) {
	s, _ := newService(t, Options{LocalIdP: true})
	ctx := context.Background()
	for _, e := range []string{`"Evil" <evil@example.com>`, `<evil@example.com>`, `evil@example.com (Evil)`, `Evil <evil@example.com>`} {
		if _, _, err := s.Setup(ctx, SetupInput{Email: e, Password: "Owner-pass1!"}); !errors.Is(err, ErrInvalid) {
			t.Errorf("setup with %q: %v, want ErrInvalid", e, err)
		}
	}
	owner, _, err := s.Setup(ctx, SetupInput{Email: " o@example.com ", Password: "Owner-pass1!"})
	if err != nil || owner.Email != "o@example.com" {
		t.Fatalf("setup: %v, %q", err, owner.Email)
	}
	if _, _, err := s.CreateInvite(ctx, owner, InviteInput{Email: `"Evil" <evil@example.com>`, Name: "E", Role: account.RoleUser}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invite: %v, want ErrInvalid", err)
	}
	if _, _, err := s.Create(ctx, owner, CreateInput{Email: `"Evil" <evil@example.com>`, Name: "E", Role: account.RoleUser}); !errors.Is(err, ErrInvalid) {
		t.Errorf("create: %v, want ErrInvalid", err)
	}
	if _, _, err := s.CreateInvite(ctx, owner, InviteInput{Email: "a@example.com", Name: "A", Role: account.RoleUser, ExpiresIn: MaxInviteTTL + time.Second}); !errors.Is(err, ErrInvalid) {
		t.Errorf("invite for longer than %v: %v, want ErrInvalid", MaxInviteTTL, err)
	}
}
