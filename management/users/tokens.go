package users

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
)

// tokenOwner checks that the caller may manage the tokens of user id:
// its own, or, for an admin, a service user's.
func (s *Service) tokenOwner(ctx context.Context, at *store.AccountTx, caller account.User, id account.UserID) error {
	if id == caller.ID {
		return nil
	}
	u, err := at.User(ctx, id)
	if err != nil {
		return err
	}
	if caller.Role.IsAdmin() && u.ServiceUser {
		return nil
	}
	if caller.Role.IsAdmin() {
		return fmt.Errorf("%w: personal access tokens belong to their user (admins manage service users' tokens)", ErrForbidden)
	}
	return ErrNotFound
}

// Tokens lists a user's tokens.
func (s *Service) Tokens(ctx context.Context, caller account.User, id account.UserID) ([]account.Token, error) {
	var out []account.Token
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := s.tokenOwner(ctx, at, caller, id); err != nil {
			return err
		}
		var err error
		out, err = at.Tokens(ctx, id)
		return err
	})
	if out == nil {
		out = []account.Token{}
	}
	return out, mapErr(err)
}

// Token returns one of a user's tokens.
func (s *Service) Token(ctx context.Context, caller account.User, id account.UserID, tid account.TokenID) (account.Token, error) {
	var out account.Token
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := s.tokenOwner(ctx, at, caller, id); err != nil {
			return err
		}
		var err error
		out, err = at.Token(ctx, id, tid)
		return err
	})
	return out, mapErr(err)
}

// MaxTokenDays bounds a token's lifetime, as the reference.
const MaxTokenDays = 365

// CreateToken makes a token; the plain token is returned only here.
func (s *Service) CreateToken(ctx context.Context, caller account.User, id account.UserID, name string, days int) (account.Token, string, error) {
	name = strings.TrimSpace(name)
	if name == "" {
		return account.Token{}, "", fmt.Errorf("%w: a token needs a name", ErrInvalid)
	}
	if days < 1 || days > MaxTokenDays {
		return account.Token{}, "", fmt.Errorf("%w: expires_in must be 1 to %d days", ErrInvalid, MaxTokenDays)
	}
	plain, hash, err := auth.NewPAT()
	if err != nil {
		return account.Token{}, "", err
	}
	now := s.now()
	t := account.Token{ID: account.TokenID(uuid.NewString()), AccountID: caller.AccountID, UserID: id, Name: name, Hash: hash,
		ExpiresAt: now.Add(time.Duration(days) * 24 * time.Hour), CreatedBy: caller.ID, CreatedAt: now}
	err = s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := s.tokenOwner(ctx, at, caller, id); err != nil {
			return err
		}
		if err := at.InsertToken(ctx, t); err != nil {
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "personal.access.token.create", Initiator: string(caller.ID), Target: string(id),
			Meta: map[string]string{"name": name}})
		return err
	})
	if err != nil {
		return account.Token{}, "", mapErr(err)
	}
	return t, plain, nil
}

// DeleteToken revokes a token.
func (s *Service) DeleteToken(ctx context.Context, caller account.User, id account.UserID, tid account.TokenID) error {
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := s.tokenOwner(ctx, at, caller, id); err != nil {
			return err
		}
		t, err := at.Token(ctx, id, tid)
		if err != nil {
			return err
		}
		if err := at.DeleteToken(ctx, id, tid); err != nil {
			return err
		}
		_, err = at.InsertEvent(ctx, account.Event{At: s.now(), Activity: "personal.access.token.delete", Initiator: string(caller.ID), Target: string(id),
			Meta: map[string]string{"name": t.Name}})
		return err
	})
	return mapErr(err)
}
