package users

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// This file holds what needs the built-in identity provider: first-run
// setup, invitations and passwords.

// SetupRequired reports whether the install still waits for its owner.
func (s *Service) SetupRequired(ctx context.Context) (bool, error) {
	if !s.o.LocalIdP {
		return false, nil
	}
	acc, err := tenant.Default(ctx, s.o.Store, s.now())
	if err != nil {
		return false, err
	}
	var has bool
	err = s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		has, err = tx.In(acc.ID).HasOwner(ctx)
		return err
	})
	return !has, err
}

// SetupInput creates the first owner.
type SetupInput struct {
	Email, Password, Name string
	CreatePAT             bool
	PATDays               int
}

// Setup creates the owner of the install's account with a local login,
// and optionally a personal access token (returned once). It refuses once
// an owner exists. Everything is created in one transaction.
func (s *Service) Setup(ctx context.Context, in SetupInput) (account.User, string, error) {
	if !s.o.LocalIdP {
		return account.User{}, "", ErrNoLocalIdP
	}
	// Every check that costs nothing comes before the password hash, which
	// costs tens of milliseconds of CPU on an unauthenticated request.
	email, err := checkEmail(in.Email)
	if err != nil {
		return account.User{}, "", err
	}
	in.Email = email
	if strings.TrimSpace(in.Name) == "" {
		in.Name = in.Email
	}
	if err := CheckPassword(in.Password); err != nil {
		return account.User{}, "", err
	}
	if in.PATDays == 0 {
		in.PATDays = 1
	}
	if in.CreatePAT && (in.PATDays < 1 || in.PATDays > MaxTokenDays) {
		return account.User{}, "", fmt.Errorf("%w: pat_expire_in must be 1 to %d days", ErrInvalid, MaxTokenDays)
	}
	required, err := s.SetupRequired(ctx)
	if err != nil {
		return account.User{}, "", err
	}
	if !required {
		return account.User{}, "", ErrSetupDone
	}
	acc, err := tenant.Default(ctx, s.o.Store, s.now())
	if err != nil {
		return account.User{}, "", err
	}
	hash, err := s.hash(in.Password)
	if err != nil {
		return account.User{}, "", fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	now := s.now()
	u := account.User{ID: account.UserID(uuid.NewString()), AccountID: acc.ID, Email: in.Email, Name: strings.TrimSpace(in.Name),
		Role: account.RoleOwner, AutoGroups: []string{}, Issued: "api", CreatedAt: now}
	var plain string
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc.ID)
		// Concurrent setups queue here; the second finds the owner.
		if _, err := at.Lock(ctx); err != nil {
			return err
		}
		if has, err := at.HasOwner(ctx); err != nil || has {
			if err == nil {
				err = ErrSetupDone
			}
			return err
		}
		if err := tx.InsertCredential(ctx, account.Credential{Subject: u.ID, Email: u.Email, Name: u.Name, PasswordHash: hash, CreatedAt: now}); err != nil {
			return err
		}
		if err := insertUser(ctx, at, u); err != nil {
			return err
		}
		if in.CreatePAT {
			var h string
			var err error
			if plain, h, err = auth.NewPAT(); err != nil {
				return err
			}
			t := account.Token{ID: account.TokenID(uuid.NewString()), AccountID: acc.ID, UserID: u.ID, Name: "setup", Hash: h,
				ExpiresAt: now.Add(time.Duration(in.PATDays) * 24 * time.Hour), CreatedBy: u.ID, CreatedAt: now}
			if err := at.InsertToken(ctx, t); err != nil {
				return err
			}
		}
		_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "user.create", Initiator: "setup", Target: string(u.ID),
			Meta: map[string]string{"email": u.Email, "role": string(u.Role)}})
		return err
	})
	if err != nil {
		return account.User{}, "", mapErr(err)
	}
	s.o.Log.Info("owner created by setup", "user", u.ID, "email", u.Email)
	return u, plain, nil
}

// DefaultInviteTTL is how long an invitation is valid unless told.
const DefaultInviteTTL = 72 * time.Hour

// MaxInviteTTL bounds an invitation's lifetime.
const MaxInviteTTL = 30 * 24 * time.Hour

func checkInviteTTL(ttl time.Duration) (time.Duration, error) {
	switch {
	case ttl == 0:
		return DefaultInviteTTL, nil
	case ttl < 0 || ttl > MaxInviteTTL:
		return 0, fmt.Errorf("%w: expires_in must be 0 (the default, %d seconds) to %d seconds", ErrInvalid, int64(DefaultInviteTTL/time.Second), int64(MaxInviteTTL/time.Second))
	}
	return ttl, nil
}

// InviteInput describes an invitation.
type InviteInput struct {
	Email, Name string
	Role        account.Role
	AutoGroups  []string
	ExpiresIn   time.Duration
}

// CreateInvite makes an invitation link token (returned once).
func (s *Service) CreateInvite(ctx context.Context, caller account.User, in InviteInput) (account.Invite, string, error) {
	if !s.o.LocalIdP {
		return account.Invite{}, "", ErrNoLocalIdP
	}
	if err := require(caller, auth.Users, auth.Create); err != nil {
		return account.Invite{}, "", err
	}
	if err := checkRole(in.Role); err != nil {
		return account.Invite{}, "", err
	}
	email, err := checkEmail(in.Email)
	if err != nil {
		return account.Invite{}, "", err
	}
	in.Email = email
	if strings.TrimSpace(in.Name) == "" {
		return account.Invite{}, "", fmt.Errorf("%w: a name is required", ErrInvalid)
	}
	if in.ExpiresIn, err = checkInviteTTL(in.ExpiresIn); err != nil {
		return account.Invite{}, "", err
	}
	if in.AutoGroups == nil {
		in.AutoGroups = []string{}
	}
	token, err := auth.NewSecret("nbi_")
	if err != nil {
		return account.Invite{}, "", err
	}
	now := s.now()
	v := account.Invite{ID: account.InviteID(uuid.NewString()), AccountID: caller.AccountID, Email: in.Email, Name: strings.TrimSpace(in.Name),
		Role: in.Role, AutoGroups: in.AutoGroups, Hash: auth.HashSecret(token), ExpiresAt: now.Add(in.ExpiresIn), CreatedBy: caller.ID, CreatedAt: now}
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := checkGroups(ctx, at, v.AutoGroups); err != nil {
			return err
		}
		if _, err := tx.CredentialByEmail(ctx, v.Email); err == nil {
			return fmt.Errorf("%w: a user with e-mail %s", ErrConflict, v.Email)
		}
		if err := at.PutInvite(ctx, v); err != nil {
			if errors.Is(err, store.ErrConflict) {
				return fmt.Errorf("%w: an invitation for %s", ErrConflict, v.Email)
			}
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "user.invite.link.create", Initiator: string(caller.ID), Target: string(v.ID),
			Meta: map[string]string{"email": v.Email}})
		return err
	})
	if err != nil {
		return account.Invite{}, "", mapErr(err)
	}
	return v, token, nil
}

// Invites lists the account's invitations.
func (s *Service) Invites(ctx context.Context, caller account.User) ([]account.Invite, error) {
	if !s.o.LocalIdP {
		return nil, ErrNoLocalIdP
	}
	if err := require(caller, auth.Users, auth.Read); err != nil {
		return nil, err
	}
	var out []account.Invite
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		out, err = tx.In(caller.AccountID).Invites(ctx)
		return err
	})
	if out == nil {
		out = []account.Invite{}
	}
	return out, mapErr(err)
}

// DeleteInvite withdraws an invitation.
func (s *Service) DeleteInvite(ctx context.Context, caller account.User, id account.InviteID) error {
	if !s.o.LocalIdP {
		return ErrNoLocalIdP
	}
	if err := require(caller, auth.Users, auth.Delete); err != nil {
		return err
	}
	return mapErr(s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := at.DeleteInvite(ctx, id); err != nil {
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{At: s.now(), Activity: "user.invite.link.delete", Initiator: string(caller.ID), Target: string(id)})
		return err
	}))
}

// RegenerateInvite issues a new token for an invitation; the old one stops
// working.
func (s *Service) RegenerateInvite(ctx context.Context, caller account.User, id account.InviteID, ttl time.Duration) (account.Invite, string, error) {
	if !s.o.LocalIdP {
		return account.Invite{}, "", ErrNoLocalIdP
	}
	if err := require(caller, auth.Users, auth.Create); err != nil {
		return account.Invite{}, "", err
	}
	ttl, err := checkInviteTTL(ttl)
	if err != nil {
		return account.Invite{}, "", err
	}
	token, err := auth.NewSecret("nbi_")
	if err != nil {
		return account.Invite{}, "", err
	}
	var v account.Invite
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		var err error
		if v, err = at.Invite(ctx, id); err != nil {
			return err
		}
		v.Hash, v.ExpiresAt = auth.HashSecret(token), s.now().Add(ttl)
		if err := at.PutInvite(ctx, v); err != nil {
			return err
		}
		_, err = at.InsertEvent(ctx, account.Event{At: s.now(), Activity: "user.invite.link.regenerate", Initiator: string(caller.ID), Target: string(id)})
		return err
	})
	if err != nil {
		return account.Invite{}, "", mapErr(err)
	}
	return v, token, nil
}

// InviteInfo describes an invitation to whoever holds its token.
type InviteInfo struct {
	Invite    account.Invite
	Valid     bool
	InvitedBy string
	// User is set for the link of an invitation e-mail: the user exists
	// and the link sets its password.
	User account.UserID
}

// LookupInvite finds an invitation, or the link of an invitation e-mail,
// by its token (no authentication: the token is the credential).
func (s *Service) LookupInvite(ctx context.Context, token string) (InviteInfo, error) {
	if !s.o.LocalIdP {
		return InviteInfo{}, ErrNoLocalIdP
	}
	var info InviteInfo
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		v, err := tx.InviteByHash(ctx, auth.HashSecret(token))
		if errors.Is(err, store.ErrNotFound) {
			info, err = s.lookupPasswordLink(ctx, tx, auth.HashSecret(token))
			return err
		}
		if err != nil {
			return err
		}
		info.Invite, info.Valid = v, s.now().Before(v.ExpiresAt)
		if by, err := tx.In(v.AccountID).User(ctx, v.CreatedBy); err == nil {
			info.InvitedBy = by.Name
		}
		return nil
	})
	return info, mapErr(err)
}

// AcceptInvite turns an invitation into a user with a local login, or
// sets the password of the user an invitation e-mail's link names.
func (s *Service) AcceptInvite(ctx context.Context, token, password string) (account.User, error) {
	if !s.o.LocalIdP {
		return account.User{}, ErrNoLocalIdP
	}
	if err := CheckPassword(password); err != nil {
		return account.User{}, err
	}
	// The token and its expiry are checked before the password is hashed:
	// a guessed token costs a lookup, not a bcrypt run.
	info, err := s.LookupInvite(ctx, token)
	if err != nil {
		return account.User{}, err
	}
	if !info.Valid {
		return account.User{}, fmt.Errorf("%w: the invitation expired at %s; ask for a new one", ErrExpired, info.Invite.ExpiresAt.Format(time.RFC3339))
	}
	hash, err := s.hash(password)
	if err != nil {
		return account.User{}, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if info.User != "" {
		return s.acceptPasswordLink(ctx, token, hash)
	}
	now := s.now()
	var u account.User
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		v, err := tx.InviteByHash(ctx, auth.HashSecret(token))
		if err != nil {
			return err
		}
		if !now.Before(v.ExpiresAt) {
			return fmt.Errorf("%w: the invitation expired at %s; ask for a new one", ErrExpired, v.ExpiresAt.Format(time.RFC3339))
		}
		at := tx.In(v.AccountID)
		u = account.User{ID: account.UserID(uuid.NewString()), AccountID: v.AccountID, Email: v.Email, Name: v.Name, Role: v.Role,
			AutoGroups: v.AutoGroups, Issued: "api", CreatedAt: now}
		if err := tx.InsertCredential(ctx, account.Credential{Subject: u.ID, Email: u.Email, Name: u.Name, PasswordHash: hash, CreatedAt: now}); err != nil {
			return err
		}
		if err := insertUser(ctx, at, u); err != nil {
			return err
		}
		if err := at.DeleteInvite(ctx, v.ID); err != nil {
			return err
		}
		_, err = at.InsertEvent(ctx, account.Event{At: now, Activity: "user.invite.link.accept", Initiator: string(u.ID), Target: string(u.ID),
			Meta: map[string]string{"email": u.Email}})
		return err
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	// A new user, with auto-groups: the users list and the log changed
	// (the route is public, so the REST layer announces nothing).
	s.o.Notify.AccountChanged(u.AccountID)
	return u, nil
}

// ChangePassword changes the caller's own local password and ends the
// built-in provider's refresh tokens of the caller.
func (s *Service) ChangePassword(ctx context.Context, caller account.User, id account.UserID, oldPW, newPW string) error {
	if !s.o.LocalIdP {
		return ErrNoLocalIdP
	}
	if id != caller.ID {
		return fmt.Errorf("%w: users change only their own password", ErrForbidden)
	}
	if err := CheckPassword(newPW); err != nil {
		return err
	}
	if !s.pwGuard.allow(id, s.now()) {
		return ErrTooManyAttempts
	}
	// bcrypt runs outside the store's write transaction: the old hash is
	// read, checked and replaced only if nobody changed it meanwhile.
	var old account.Credential
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		old, err = tx.Credential(ctx, id)
		return err
	})
	if err != nil {
		return mapErr(err)
	}
	if s.compare(old.PasswordHash, oldPW) != nil {
		s.pwGuard.fail(id, s.now())
		return fmt.Errorf("%w: the old password is wrong", ErrInvalid)
	}
	hash, err := s.hash(newPW)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	now := s.now()
	return mapErr(s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		c, err := tx.Credential(ctx, id)
		if err != nil {
			return err
		}
		if c.PasswordHash != old.PasswordHash {
			return fmt.Errorf("%w: the password was changed meanwhile; try again", ErrConflict)
		}
		if err := tx.SetPassword(ctx, id, hash); err != nil {
			return err
		}
		// The built-in provider's refresh tokens end with the old
		// password (and the access tokens last issued from them): a
		// stolen one stops working, and every session logs in again.
		if err := tx.DeleteRefreshTokensOf(ctx, string(id), "", now); err != nil {
			return err
		}
		_, err = tx.In(caller.AccountID).InsertEvent(ctx, account.Event{At: now, Activity: "user.password.change", Initiator: string(id), Target: string(id)})
		return err
	}))
}
