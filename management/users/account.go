package users

import (
	"context"
	"errors"
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// ErrNotAllowedGroup: the account admits only users of some JWT groups
// (jwt_allow_groups) and the token names none of them.
var ErrNotAllowedGroup = fmt.Errorf("%w: user does not belong to any of the allowed JWT groups", ErrForbidden)

// DeleteAccount removes the caller's account and everything in it (peers,
// users, groups, policies, setup keys, tokens, invites, events...) in one
// transaction. Only the owner may; another account is ErrNotFound. The
// account's users lose their local logins, and the tokens their identity
// provider issued so far stop working. The peers' streams end when the
// notifier tells the account changed.
func (s *Service) DeleteAccount(ctx context.Context, caller account.User, id account.ID) error {
	if id != caller.AccountID {
		return ErrNotFound
	}
	if caller.Role != account.RoleOwner {
		return fmt.Errorf("%w: only the owner can delete the account", ErrForbidden)
	}
	now := s.now()
	var n int
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		// The install's first account is recreated, ownerless, at the next
		// request when everyone lives in it (single mode) or the built-in
		// provider runs (its setup fills that account): anyone could then
		// take the install over through POST /api/setup, or the next person
		// to log in would own it.
		if s.o.Mode == SingleAccount || s.o.LocalIdP {
			accs, err := tx.Accounts(ctx)
			if err != nil {
				return err
			}
			if len(accs) > 0 && accs[0].ID == id {
				return ErrSoleAccount
			}
		}
		at := tx.In(id)
		us, err := at.Users(ctx)
		if err != nil {
			return err
		}
		n = len(us)
		for _, u := range us {
			// Its tokens stop working and the built-in provider's refresh
			// tokens go (invitations go with the account).
			if err := endAccess(ctx, tx, at, u.ID, now); err != nil {
				return err
			}
			if err := tx.DeleteCredential(ctx, u.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		// Announced to every instance (on Postgres) when this commits: their
		// streams of the account's peers find it gone and end.
		if _, err := at.BumpSerial(ctx); err != nil {
			return err
		}
		return tx.DeleteAccount(ctx, id)
	})
	if err != nil {
		return mapErr(err)
	}
	s.o.Log.InfoContext(ctx, "account deleted", "account", id, "by", caller.ID, "users", n)
	s.o.Notify.AccountChanged(id)
	return nil
}
