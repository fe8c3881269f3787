// Package users places people and programs in accounts and decides what
// they may do: it turns verified token claims or a personal access token
// into an account.User (creating the user, and in multi-account mode its
// account, on first sight), enforces roles (package auth's table), keeps
// users who join by e-mail domain pending until approved when the account
// asks for it (approval.go), manages users, service users, their personal
// access tokens and, with the built-in identity provider, first-run setup,
// invitations and passwords.
// Blocking or deleting a user changes the account's network so that its
// peers drop out of every map at once. It knows nothing about HTTP.
package users

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// Mode says which account a new user joins.
type Mode string

// The modes.
const (
	// SingleAccount: everyone joins the install's one account (the
	// self-hosted default, as the reference's single-account mode).
	SingleAccount Mode = "single"
	// DomainAccounts: a user whose verified e-mail address is in a domain
	// the operator lists (Options.AccountDomains) joins that domain's
	// account, the first one creating it as owner; a verified address in a
	// domain an account's admin claimed joins that account; everyone else
	// gets an account of their own.
	DomainAccounts Mode = "domain"
)

// ParseMode accepts "single" and "domain".
func ParseMode(s string) (Mode, error) {
	switch Mode(s) {
	case "", SingleAccount:
		return SingleAccount, nil
	case DomainAccounts:
		return DomainAccounts, nil
	}
	return "", fmt.Errorf("unknown account mode %q (want single or domain)", s)
}

// Notifier learns that an account's network changed.
type Notifier interface {
	AccountChanged(id account.ID)
}

// noNotify is the notifier of a service given none.
type noNotify struct{}

func (noNotify) AccountChanged(account.ID) {}

// Options configure the service.
type Options struct {
	Store  *store.Store
	Notify Notifier
	Log    *slog.Logger
	Now    func() time.Time
	Mode   Mode
	// AccountDomains are the e-mail domains whose verified users share an
	// account in domain mode (see ParseDomains).
	AccountDomains []string
	// LocalIdP: the built-in identity provider is on, and it is then the
	// only issuer of accepted tokens. Its users exist before they can log
	// in, so a token never creates a user.
	LocalIdP bool
	// Mailer sends invitations by e-mail (built-in provider only; nil:
	// none are sent, and POST /api/users returns a generated password).
	Mailer Mailer
	// InviteURL is the page invitation mails link to, with ?token= added
	// (the dashboard's /invite).
	InviteURL string
}

// ParseDomains normalises a list of e-mail domains (lower case, no
// trailing dot) and refuses what cannot be one.
func ParseDomains(list []string) ([]string, error) {
	out := []string{}
	for _, d := range list {
		d = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(d)), ".")
		if d == "" {
			continue
		}
		if !validDomain(d) {
			return nil, fmt.Errorf("%q is not an e-mail domain", d)
		}
		if !slices.Contains(out, d) {
			out = append(out, d)
		}
	}
	return out, nil
}

// validDomain accepts dot-separated labels of letters, digits and hyphens
// with at least two labels.
func validDomain(d string) bool {
	labels := strings.Split(d, ".")
	if len(d) > 253 || len(labels) < 2 {
		return false
	}
	for _, l := range labels {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// Service is the user directory of every account.
type Service struct {
	o Options
	// hash and compare are bcrypt (tests watch when they run).
	hash    func(pw string) (string, error)
	compare func(hash, pw string) error
	// pwGuard limits wrong old passwords per user.
	pwGuard *guard
	// pendingRefused counts upstream logins refused by the caps on users
	// waiting for approval.
	pendingRefused atomic.Int64
}

// New returns a service.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Mode == "" {
		o.Mode = SingleAccount
	}
	if o.Notify == nil {
		o.Notify = noNotify{}
	}
	return &Service{o: o, hash: idp.HashPassword, compare: comparePassword, pwGuard: newGuard(passwordBurst, passwordRefill)}
}

// LocalIdP reports whether the built-in identity provider is on.
func (s *Service) LocalIdP() bool { return s.o.LocalIdP }

func (s *Service) now() time.Time { return s.o.Now().UTC() }

// mapErr turns store errors into this package's.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrNotFound):
		return fmt.Errorf("%w: %w", ErrNotFound, err)
	case errors.Is(err, store.ErrConflict):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	}
	return err
}

// --- authentication ---

// FromClaims returns the user behind verified token claims. With an
// external identity provider it creates the user on first sight: in the
// install's one account or (domain mode) as join decides, as owner when
// that account has none. A token issued before its subject was deleted or
// blocked, or revoked at the built-in provider, is refused, and with the
// built-in provider a token never creates a user. A blocked user gets
// ErrBlocked. With JWT group sync on, the token's groups become the user's
// groups.
func (s *Service) FromClaims(ctx context.Context, c auth.Claims) (account.User, error) {
	var (
		u       account.User
		changed bool
		joined  bool // a first login created the user
	)
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		var err error
		u, err = tx.UserByID(ctx, account.UserID(c.Subject))
		if err == nil && u.Blocked {
			return ErrBlocked
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if err := checkRevoked(ctx, tx, c); err != nil {
			return err
		}
		if errors.Is(err, store.ErrNotFound) {
			if s.o.LocalIdP {
				return fmt.Errorf("%w: unknown user", ErrUnauthenticated)
			}
			if u, err = s.join(ctx, tx, c); err != nil {
				return err
			}
			joined = true
		}
		if u.PendingApproval {
			// Kept (a new user must be stored to be approved), refused
			// below.
			return nil
		}
		at := tx.In(u.AccountID)
		acc, err := at.Account(ctx)
		if err != nil {
			return err
		}
		before := u
		if acc.Settings.JWTGroupsEnabled {
			groups := c.GroupsFrom(acc.Settings.JWTGroupsClaimName)
			// The built-in provider's users have no groups claim to match.
			if !s.o.LocalIdP && !acc.Settings.JWTAllows(groups) {
				return ErrNotAllowedGroup
			}
			if changed, err = s.syncGroups(ctx, at, &u, groups, acc.Settings.GroupsPropagationEnabled); err != nil {
				return err
			}
		}
		if c.Email != "" {
			u.Email, u.EmailVerified = c.Email, c.EmailVerified
		}
		if c.Name != "" {
			u.Name = c.Name
		}
		// Every request with a token passes here: write only what changed,
		// and the login time at most once a minute.
		now := s.now()
		if now.Sub(u.LastLogin) >= time.Minute {
			u.LastLogin = now
		}
		if changed || u.Email != before.Email || u.EmailVerified != before.EmailVerified || u.Name != before.Name || !u.LastLogin.Equal(before.LastLogin) ||
			!slices.Equal(u.AutoGroups, before.AutoGroups) {
			return at.UpdateUser(ctx, u)
		}
		return nil
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	if changed || joined {
		// A new user (pending approval too: the admins approve it from
		// the users list) or new group memberships.
		s.o.Notify.AccountChanged(u.AccountID)
	}
	if u.PendingApproval {
		return account.User{}, ErrPendingApproval
	}
	return u, nil
}

// publicMail are providers whose users do not share an organisation.
var publicMail = map[string]bool{
	"gmail.com": true, "googlemail.com": true, "outlook.com": true, "hotmail.com": true, "live.com": true,
	"yahoo.com": true, "icloud.com": true, "me.com": true, "proton.me": true, "protonmail.com": true,
	"gmx.de": true, "gmx.net": true, "web.de": true, "aol.com": true, "mail.ru": true, "yandex.ru": true,
	"qq.com": true, "163.com": true,
}

// checkRevoked refuses a token revoked at the built-in provider (by jti)
// or issued at or before its subject was deleted or blocked. Token times
// are whole seconds, so a token of the same second as the revocation is
// refused too.
func checkRevoked(ctx context.Context, tx *store.Tx, c auth.Claims) error {
	if c.TokenID != "" {
		revoked, err := tx.AccessTokenRevoked(ctx, c.TokenID)
		if err != nil {
			return err
		}
		if revoked {
			return fmt.Errorf("%w: the token was revoked; log in again", ErrUnauthenticated)
		}
	}
	at, err := tx.SubjectRevokedAt(ctx, account.UserID(c.Subject))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !c.IssuedAt.After(at) {
		return fmt.Errorf("%w: the token was issued before the user was deleted or blocked; log in again", ErrUnauthenticated)
	}
	return nil
}

// join creates the user of a subject seen for the first time.
func (s *Service) join(ctx context.Context, tx *store.Tx, c auth.Claims) (account.User, error) {
	now := s.now()
	var (
		acc account.ID
		err error
	)
	if s.o.Mode == SingleAccount {
		accs, err := tx.Accounts(ctx)
		if err != nil {
			return account.User{}, err
		}
		if len(accs) == 0 {
			a, err := tenant.Create(ctx, tx, now)
			if err != nil {
				return account.User{}, err
			}
			accs = append(accs, a)
		}
		acc = accs[0].ID
	} else if acc, err = s.domainAccount(ctx, tx, c, now); err != nil {
		return account.User{}, err
	}
	at := tx.In(acc)
	// Queue behind other first logins of this account, so that exactly
	// one of them becomes its owner.
	if _, err := at.Lock(ctx); err != nil {
		return account.User{}, err
	}
	hasOwner, err := at.HasOwner(ctx)
	if err != nil {
		return account.User{}, err
	}
	role := account.RoleUser
	if !hasOwner {
		role = account.RoleOwner
	}
	u := account.User{ID: account.UserID(c.Subject), AccountID: acc, Email: c.Email, EmailVerified: c.EmailVerified, Name: c.Name, Role: role,
		AutoGroups: []string{}, Issued: "jwt", CreatedAt: now}
	// Joining someone else's account by e-mail domain waits for an admin
	// when the account asks for it.
	if hasOwner && s.o.Mode == DomainAccounts {
		a, err := at.Account(ctx)
		if err != nil {
			return account.User{}, err
		}
		u.PendingApproval = a.Settings.Extra.UserApprovalRequired
	}
	if err := insertUser(ctx, at, u); err != nil {
		return account.User{}, err
	}
	meta := map[string]string{"email": u.Email, "role": string(role)}
	if u.PendingApproval {
		meta["pending_approval"] = "true"
	}
	if _, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "user.join", Initiator: string(u.ID), Target: string(u.ID),
		Meta: meta}); err != nil {
		return account.User{}, err
	}
	s.o.Log.Info("user joined", "user", u.ID, "email", u.Email, "account", acc, "role", role, "pending_approval", u.PendingApproval)
	return u, nil
}

// domainAccount picks a new user's account in domain mode. Only a
// verified address groups: in a domain the operator lists (the account is
// created on first sight) or one an account claimed. Anyone else gets an
// account of their own, of which they are the owner.
func (s *Service) domainAccount(ctx context.Context, tx *store.Tx, c auth.Claims, now time.Time) (account.ID, error) {
	domain := emailDomain(c.Email)
	if c.EmailVerified && domain != "" {
		if slices.Contains(s.o.AccountDomains, domain) {
			id, err := tx.AccountByUserDomain(ctx, domain)
			if !errors.Is(err, store.ErrNotFound) {
				return id, err
			}
			a, err := tenant.Create(ctx, tx, now)
			if err != nil {
				return "", err
			}
			return a.ID, tx.In(a.ID).SetUserDomain(ctx, domain)
		}
		id, err := tx.AccountByClaimedDomain(ctx, domain)
		if !errors.Is(err, store.ErrNotFound) {
			return id, err
		}
	}
	a, err := tenant.Create(ctx, tx, now)
	return a.ID, err
}

// emailDomain is the lower-case domain of an address ("" if none).
func emailDomain(email string) string {
	i := strings.LastIndexByte(email, '@')
	if i < 0 {
		return ""
	}
	return strings.TrimSuffix(strings.ToLower(strings.TrimSpace(email[i+1:])), ".")
}

// syncGroups makes the token's groups the user's groups (creating groups
// that do not exist yet) and moves the user's peers along: into groups
// the IdP added, out of groups it took away, when propagate (the account's
// groups propagation) is on. It reports whether the network changed.
func (s *Service) syncGroups(ctx context.Context, at *store.AccountTx, u *account.User, names []string, propagate bool) (bool, error) {
	want := []string{}
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "" || n == "All" {
			continue
		}
		g, err := at.GroupByName(ctx, n)
		if errors.Is(err, store.ErrNotFound) {
			g = account.Group{ID: account.GroupID(uuid.NewString()), AccountID: at.ID(), Name: n, Peers: []account.PeerID{}}
			err = at.PutGroup(ctx, g)
		}
		if err != nil {
			return false, err
		}
		if !slices.Contains(want, string(g.ID)) {
			want = append(want, string(g.ID))
		}
	}
	slices.Sort(want)
	old := slices.Clone(u.AutoGroups)
	slices.Sort(old)
	if slices.Equal(old, want) {
		return false, nil
	}
	changed := false
	if propagate {
		var err error
		if changed, err = propagateGroups(ctx, at, u.ID, old, want); err != nil {
			return false, err
		}
	}
	u.AutoGroups = want
	if changed {
		if _, err := at.BumpSerial(ctx); err != nil {
			return false, err
		}
	}
	return changed, nil
}

// FromPAT returns the user behind a personal access token.
func (s *Service) FromPAT(ctx context.Context, plain string) (account.User, error) {
	hash, err := auth.ParsePAT(plain)
	if err != nil {
		return account.User{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	var u account.User
	now := s.now()
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		var t account.Token
		if u, t, err = patUser(ctx, tx, hash, now); err != nil {
			return err
		}
		return tx.In(t.AccountID).TouchToken(ctx, t.ID, now.UnixNano())
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	return u, nil
}
