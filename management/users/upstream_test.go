package users

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// upstreamRig is a built-in provider's account with an upstream identity
// provider "up" an admin added (whose issuer whoever runs it controls).
type upstreamRig struct {
	t     *testing.T
	s     *Service
	st    *store.Store
	owner account.User
}

func newUpstreamRig(t *testing.T) *upstreamRig {
	t.Helper()
	s, st := newService(t, Options{LocalIdP: true})
	ctx := context.Background()
	owner, _, err := s.Setup(ctx, SetupInput{Email: "owner@example.com", Password: "Owner-passw0rd!", Name: "Owner"})
	if err != nil {
		t.Fatal(err)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		return tx.In(owner.AccountID).InsertIdentityProvider(ctx, store.IdentityProvider{ID: "up", AccountID: owner.AccountID, Type: "oidc",
			Name: "Attacker", Issuer: "https://idp.attacker.example", ClientID: "c", CreatedAt: time.Now().UTC()})
	})
	if err != nil {
		t.Fatal(err)
	}
	return &upstreamRig{t: t, s: s, st: st, owner: owner}
}

// insertUser adds a user with no local login (as an external provider's
// user would be), with a TOTP factor when totp is set.
func (r *upstreamRig) insertUser(email string, role account.Role, totp bool) account.User {
	r.t.Helper()
	ctx := context.Background()
	u := account.User{ID: account.UserID("u-" + email), AccountID: r.owner.AccountID, Email: email, Name: email, Role: role,
		AutoGroups: []string{}, Issued: "api", CreatedAt: time.Now().UTC()}
	err := r.st.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.In(r.owner.AccountID).InsertUser(ctx, u); err != nil {
			return err
		}
		if !totp {
			return nil
		}
		return tx.PutTOTPFactor(ctx, store.TOTPFactor{Subject: string(u.ID), Secret: "JBSWY3DPEHPK3PXP", Confirmed: true, CreatedAt: time.Now().UTC()})
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return r.get(u.ID)
}

// state is what an upstream login may change: the account's users and
// invitations, and the provider's links.
type upstreamState struct {
	Users   []account.User
	Invites []account.Invite
	Links   map[string]account.UserID
}

func (r *upstreamRig) state(subjects ...string) upstreamState {
	r.t.Helper()
	ctx := context.Background()
	s := upstreamState{Links: map[string]account.UserID{}}
	err := r.st.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(r.owner.AccountID)
		var err error
		if s.Users, err = at.Users(ctx); err != nil {
			return err
		}
		if s.Invites, err = at.Invites(ctx); err != nil {
			return err
		}
		for _, sub := range subjects {
			id, err := tx.IdPLink(ctx, "up", sub)
			switch {
			case err == nil:
				s.Links[sub] = id
			case !errors.Is(err, store.ErrNotFound):
				return err
			}
		}
		return nil
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return s
}

func (r *upstreamRig) get(id account.UserID) account.User {
	r.t.Helper()
	var u account.User
	err := r.st.Read(context.Background(), func(tx *store.Tx) error {
		var err error
		u, err = tx.In(r.owner.AccountID).User(context.Background(), id)
		return err
	})
	if err != nil {
		r.t.Fatal(err)
	}
	return u
}

func (r *upstreamRig) join(sub, email string) (account.User, error) {
	return r.s.JoinUpstream(context.Background(), r.owner.AccountID, UpstreamLogin{ProviderID: "up", Subject: sub, Email: email, Name: "Upstream " + sub,
		EmailVerified: true})
}

// TestJoinUpstreamRefusesLocalAccounts: an upstream provider vouching for
// (email_verified) the address of the owner, an admin, or a user with a
// local password or second factor does not log in as that user: the login
// is refused with a message saying to use the password, and nothing
// changes (no link, no user, the user as it was).
func TestJoinUpstreamRefusesLocalAccounts(t *testing.T) {
	r := newUpstreamRig(t)
	ctx := context.Background()
	admin := r.insertUser("admin@example.com", account.RoleAdmin, false)
	pwUser, _, err := r.s.Create(ctx, r.owner, CreateInput{Email: "pw@example.com", Name: "Pw", Role: account.RoleUser})
	if err != nil {
		t.Fatal(err)
	}
	totpUser := r.insertUser("totp@example.com", account.RoleUser, true)
	for _, tc := range []struct {
		name string
		user account.User
	}{
		{"owner", r.owner},
		{"admin without local login", admin},
		{"user with a local password", pwUser},
		{"user with a TOTP factor", totpUser},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sub := "s-" + tc.user.Email
			before := r.state(sub)
			for _, email := range []string{tc.user.Email, strings.ToUpper(tc.user.Email)} {
				u, err := r.join(sub, email)
				if !errors.Is(err, ErrForbidden) || !strings.Contains(err.Error(), "an account with this e-mail already exists here: log in with its password") {
					t.Fatalf("upstream login as %s (%s): %+v %v, want refused", tc.name, email, u, err)
				}
				if u.ID != "" {
					t.Fatalf("refused login returned user %s", u.ID)
				}
			}
			if d := cmp.Diff(before, r.state(sub)); d != "" {
				t.Fatalf("a refused login changed the account (-before +after):\n%s", d)
			}
			if got := r.get(tc.user.ID); got.Role != tc.user.Role || got.PendingApproval || got.Blocked {
				t.Fatalf("user after the refused login: %+v", got)
			}
		})
	}
}

// TestJoinUpstreamLinks: a verified address links to a plain user with no
// local login (and keeps doing so), to an invitation (its role and
// groups); an unknown person becomes a user pending approval even when
// the account does not require approval, until an admin approves it.
func TestJoinUpstreamLinks(t *testing.T) {
	r := newUpstreamRig(t)
	ctx := context.Background()
	requireApproval(t, r.st, r.owner.AccountID, false)

	plain := r.insertUser("plain@example.com", account.RoleUser, false)
	for i := 0; i < 2; i++ {
		u, err := r.join("s-plain", "plain@example.com")
		if err != nil || u.ID != plain.ID {
			t.Fatalf("login %d of a user without local login: %+v %v, want %s", i, u, err, plain.ID)
		}
	}

	if _, _, err := r.s.CreateInvite(ctx, r.owner, InviteInput{Email: "inv@example.com", Name: "Inv", Role: account.RoleAdmin, AutoGroups: []string{}}); err != nil {
		t.Fatal(err)
	}
	inv, err := r.join("s-inv", "Inv@example.com")
	if err != nil || inv.Role != account.RoleAdmin || inv.PendingApproval {
		t.Fatalf("invited address: %+v %v", inv, err)
	}
	if st := r.state(); len(st.Invites) != 0 {
		t.Fatalf("invitation left after it linked: %v", st.Invites)
	}
	// The linked identity keeps logging in as the invited user.
	if again, err := r.join("s-inv", "inv@example.com"); err != nil || again.ID != inv.ID {
		t.Fatalf("invited user's second login: %+v %v", again, err)
	}

	before := len(r.state().Users)
	if u, err := r.join("s-new", "new@example.com"); !errors.Is(err, ErrPendingApproval) || u.ID != "" {
		t.Fatalf("unknown person: %+v %v, want ErrPendingApproval", u, err)
	}
	st := r.state("s-new")
	id, ok := st.Links["s-new"]
	if !ok || len(st.Users) != before+1 {
		t.Fatalf("no pending user recorded: links %v, %d users", st.Links, len(st.Users))
	}
	if u := r.get(id); !u.PendingApproval || u.Role != account.RoleUser || u.Email != "new@example.com" {
		t.Fatalf("new upstream user: %+v", u)
	}
	if _, err := r.join("s-new", "new@example.com"); !errors.Is(err, ErrPendingApproval) {
		t.Fatalf("pending user's second login: %v", err)
	}
	if len(r.state().Users) != before+1 {
		t.Fatal("a second login of a pending person made another user")
	}
	if _, err := r.s.Approve(ctx, r.owner, id); err != nil {
		t.Fatal(err)
	}
	if u, err := r.join("s-new", "new@example.com"); err != nil || u.ID != id {
		t.Fatalf("approved user's login: %+v %v", u, err)
	}
}
