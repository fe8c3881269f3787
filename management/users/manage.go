package users

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
)

// List returns the users the caller may see: all of the account's for an
// admin, only itself for a user. serviceUsers, when set, keeps only
// service users (true) or only people (false).
func (s *Service) List(ctx context.Context, caller account.User, serviceUsers *bool) ([]account.User, error) {
	var all []account.User
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		all, err = tx.In(caller.AccountID).Users(ctx)
		return err
	})
	if err != nil {
		return nil, mapErr(err)
	}
	out := []account.User{}
	for _, u := range all {
		if !may(caller, auth.Users, auth.Read) && u.ID != caller.ID {
			continue
		}
		if serviceUsers != nil && u.ServiceUser != *serviceUsers {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// Get returns one user the caller may see.
func (s *Service) Get(ctx context.Context, caller account.User, id account.UserID) (account.User, error) {
	if !may(caller, auth.Users, auth.Read) && id != caller.ID {
		return account.User{}, ErrNotFound
	}
	var u account.User
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		u, err = tx.In(caller.AccountID).User(ctx, id)
		return err
	})
	return u, mapErr(err)
}

// CreateInput describes a new user.
type CreateInput struct {
	Email, Name string
	Role        account.Role
	AutoGroups  []string
	ServiceUser bool
}

// Create adds a service user, or (with the built-in identity provider) a
// person: invited by e-mail when invitations are mailed (createInvited),
// else with a generated password, returned once.
func (s *Service) Create(ctx context.Context, caller account.User, in CreateInput) (account.User, string, error) {
	if err := require(caller, auth.Users, auth.Create); err != nil {
		return account.User{}, "", err
	}
	if err := checkRole(in.Role); err != nil {
		return account.User{}, "", err
	}
	now := s.now()
	u := account.User{ID: account.UserID(uuid.NewString()), AccountID: caller.AccountID, Email: strings.TrimSpace(in.Email), Name: strings.TrimSpace(in.Name),
		Role: in.Role, AutoGroups: in.AutoGroups, ServiceUser: in.ServiceUser, Issued: "api", CreatedAt: now}
	if u.AutoGroups == nil {
		u.AutoGroups = []string{}
	}
	var password string
	if !u.ServiceUser {
		if !s.o.LocalIdP {
			return account.User{}, "", fmt.Errorf("%w: with an external identity provider people join by logging in; create them there", ErrNoLocalIdP)
		}
		email, err := checkEmail(u.Email)
		if err != nil {
			return account.User{}, "", err
		}
		u.Email = email
		if u.Name == "" {
			u.Name = u.Email
		}
		b := make([]byte, 15)
		if _, err := rand.Read(b); err != nil {
			return account.User{}, "", err
		}
		password = base64.RawURLEncoding.EncodeToString(b)
	} else if u.Name == "" {
		return account.User{}, "", fmt.Errorf("%w: a service user needs a name", ErrInvalid)
	}
	var hash string
	if !u.ServiceUser {
		// Hashed before the transaction, which would otherwise hold the
		// store's write lock through bcrypt.
		var err error
		if hash, err = s.hash(password); err != nil {
			return account.User{}, "", err
		}
		if s.MailInvites() {
			// Invited by e-mail: the person chooses the password.
			u, err := s.createInvited(ctx, caller, u, hash)
			return u, "", err
		}
	}
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := checkGroups(ctx, at, u.AutoGroups); err != nil {
			return err
		}
		if !u.ServiceUser {
			if _, err := tx.CredentialByEmail(ctx, u.Email); err == nil {
				return fmt.Errorf("%w: a user with e-mail %s", ErrConflict, u.Email)
			}
			if err := tx.InsertCredential(ctx, account.Credential{Subject: u.ID, Email: u.Email, Name: u.Name, PasswordHash: hash, CreatedAt: now}); err != nil {
				return err
			}
		}
		if err := insertUser(ctx, at, u); err != nil {
			return err
		}
		activity := "user.create"
		if u.ServiceUser {
			activity = "service.user.create"
		}
		_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: activity, Initiator: string(caller.ID), Target: string(u.ID),
			Meta: map[string]string{"name": u.Name, "email": u.Email, "role": string(u.Role)}})
		return err
	})
	if err != nil {
		return account.User{}, "", mapErr(err)
	}
	return u, password, nil
}

func checkRole(r account.Role) error {
	if _, ok := account.ParseRole(string(r)); !ok {
		return fmt.Errorf("%w: unknown role %q (want admin, user, auditor, network_admin or billing_admin)", ErrInvalid, r)
	}
	if r == account.RoleOwner {
		return fmt.Errorf("%w: there is one owner per account; give the admin role instead", ErrInvalid)
	}
	return nil
}

// checkGroups refuses group IDs that are not the account's.
func checkGroups(ctx context.Context, at *store.AccountTx, ids []string) error {
	missing, err := at.MissingGroup(ctx, ids)
	if err == nil && missing != "" {
		err = fmt.Errorf("%w: group %q does not exist", ErrInvalid, missing)
	}
	return err
}

// UpdateInput is what an admin may change about a user.
type UpdateInput struct {
	Role       account.Role
	AutoGroups []string
	Blocked    bool
}

// Update changes a user's role, groups and block. Blocking takes the
// user's peers out of every network map and ends their sessions.
func (s *Service) Update(ctx context.Context, caller account.User, id account.UserID, in UpdateInput) (account.User, error) {
	if err := require(caller, auth.Users, auth.Update); err != nil {
		return account.User{}, err
	}
	var (
		u       account.User
		network bool
	)
	now := s.now()
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		var err error
		if u, err = at.User(ctx, id); err != nil {
			return err
		}
		if u.Role == account.RoleOwner {
			if in.Role != account.RoleOwner {
				return fmt.Errorf("%w: the owner's role cannot be changed", ErrInvalid)
			}
			if in.Blocked {
				return fmt.Errorf("%w: the owner cannot be blocked", ErrInvalid)
			}
		} else if err := checkRole(in.Role); err != nil {
			return err
		}
		if in.Blocked && id == caller.ID {
			return fmt.Errorf("%w: you cannot block yourself", ErrInvalid)
		}
		if in.AutoGroups == nil {
			in.AutoGroups = []string{}
		}
		if err := checkGroups(ctx, at, in.AutoGroups); err != nil {
			return err
		}
		events := []account.Event{}
		ev := func(activity string, meta map[string]string) {
			events = append(events, account.Event{At: now, Activity: activity, Initiator: string(caller.ID), Target: string(id), Meta: meta})
		}
		if in.Role != u.Role {
			ev("user.role.update", map[string]string{"role": string(in.Role)})
		}
		if in.Blocked != u.Blocked {
			network = true
			if in.Blocked {
				ev("user.block", map[string]string{"email": u.Email})
			} else {
				ev("user.unblock", map[string]string{"email": u.Email})
			}
		}
		if in.Blocked && !u.Blocked {
			if err := endAccess(ctx, tx, at, id, now); err != nil {
				return err
			}
		}
		if !sameSet(u.AutoGroups, in.AutoGroups) {
			acc, err := at.Account(ctx)
			if err != nil {
				return err
			}
			if acc.Settings.GroupsPropagationEnabled {
				moved, err := propagateGroups(ctx, at, id, u.AutoGroups, in.AutoGroups)
				if err != nil {
					return err
				}
				network = network || moved
			}
		}
		u.Role, u.AutoGroups, u.Blocked = in.Role, in.AutoGroups, in.Blocked
		if err := at.UpdateUser(ctx, u); err != nil {
			return err
		}
		for _, e := range events {
			if _, err := at.InsertEvent(ctx, e); err != nil {
				return err
			}
		}
		if network {
			_, err = at.BumpSerial(ctx)
		}
		return err
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	if network {
		s.o.Log.Info("user block changed", "user", id, "blocked", u.Blocked, "by", caller.ID)
		s.o.Notify.AccountChanged(caller.AccountID)
	}
	return u, nil
}

// endAccess voids every token issued to a user so far (JWTs by their
// issue time; the built-in provider's refresh tokens are deleted; personal access tokens are refused while the user is blocked
// and deleted with it) and withdraws the invitations it created.
func endAccess(ctx context.Context, tx *store.Tx, at *store.AccountTx, id account.UserID, now time.Time) error {
	if err := tx.RevokeSubject(ctx, id, now); err != nil {
		return err
	}
	// The built-in provider's refresh tokens go too: no new access token.
	if err := tx.DeleteRefreshTokensOf(ctx, string(id), "", now); err != nil {
		return err
	}
	if _, err := at.DeleteInvitesBy(ctx, id); err != nil {
		return err
	}
	// A mailed link that would set its password goes too.
	if err := at.DeletePasswordLink(ctx, id, ""); err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return nil
}

// Delete removes a user, its tokens, the invitations it created, its local
// login and the peers it added, and voids the tokens its identity provider
// issued so far: an old token neither works nor creates the user again.
func (s *Service) Delete(ctx context.Context, caller account.User, id account.UserID) error {
	if err := require(caller, auth.Users, auth.Delete); err != nil {
		return err
	}
	if id == caller.ID {
		return fmt.Errorf("%w: you cannot delete yourself", ErrInvalid)
	}
	now := s.now()
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		u, err := at.User(ctx, id)
		if err != nil {
			return err
		}
		if u.Role == account.RoleOwner {
			return fmt.Errorf("%w: the owner cannot be deleted", ErrInvalid)
		}
		peers, err := remove(ctx, tx, at, id, now)
		if err != nil {
			return err
		}
		activity := "user.delete"
		if u.ServiceUser {
			activity = "service.user.delete"
		}
		_, err = at.InsertEvent(ctx, account.Event{At: now, Activity: activity, Initiator: string(caller.ID), Target: string(id),
			Meta: map[string]string{"email": u.Email, "name": u.Name, "peers": fmt.Sprint(peers)}})
		return err
	})
	if err != nil {
		return mapErr(err)
	}
	s.o.Notify.AccountChanged(caller.AccountID)
	return nil
}

// remove deletes a user with the peers it added, its tokens, the
// invitations it created and its local login, voids the tokens issued to
// it so far and reports how many peers went.
func remove(ctx context.Context, tx *store.Tx, at *store.AccountTx, id account.UserID, now time.Time) (int, error) {
	peers, err := at.UserPeers(ctx, id)
	if err != nil {
		return 0, err
	}
	for _, p := range peers {
		if err := at.DeletePeer(ctx, p.ID); err != nil {
			return 0, err
		}
	}
	if err := endAccess(ctx, tx, at, id, now); err != nil {
		return 0, err
	}
	if err := at.DeleteTokensOf(ctx, id); err != nil {
		return 0, err
	}
	if err := at.DeleteUser(ctx, id); err != nil {
		return 0, err
	}
	if err := tx.DeleteCredential(ctx, id); err != nil && !errors.Is(err, store.ErrNotFound) {
		return 0, err
	}
	if _, err := at.BumpSerial(ctx); err != nil {
		return 0, err
	}
	return len(peers), nil
}

// may reports whether the caller's role lets it perform op on every
// object of module (not only its own).
func may(caller account.User, m auth.Module, op auth.Operation) bool {
	return auth.Can(caller, m, op) == auth.All
}

// require refuses the caller unless may.
func require(caller account.User, m auth.Module, op auth.Operation) error {
	if !may(caller, m, op) {
		return fmt.Errorf("%w: the %s role may not %s %s", ErrForbidden, caller.Role, op, m)
	}
	return nil
}
