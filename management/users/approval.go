package users

import (
	"context"
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
)

// This file holds user approval: with the account's
// settings.extra.user_approval_required on, a user who joins by e-mail
// domain (domain account mode) is stored pending and refused everything
// (ErrPendingApproval) until an admin approves or rejects it.

// pendingUser loads one of the account's users that waits for approval.
func pendingUser(ctx context.Context, at *store.AccountTx, id account.UserID) (account.User, error) {
	u, err := at.User(ctx, id)
	if err != nil {
		return u, err
	}
	if !u.PendingApproval {
		return u, fmt.Errorf("%w: user %s is not pending approval", ErrInvalid, id)
	}
	return u, nil
}

// Approve lets a pending user in.
func (s *Service) Approve(ctx context.Context, caller account.User, id account.UserID) (account.User, error) {
	if err := require(caller, auth.Users, auth.Update); err != nil {
		return account.User{}, err
	}
	var u account.User
	now := s.now()
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		var err error
		if u, err = pendingUser(ctx, at, id); err != nil {
			return err
		}
		u.PendingApproval = false
		if err := at.UpdateUser(ctx, u); err != nil {
			return err
		}
		// Now among the SSH users agents accept tokens of (sshusers.go).
		if _, err := at.BumpSerial(ctx); err != nil {
			return err
		}
		_, err = at.InsertEvent(ctx, account.Event{At: now, Activity: "user.approve", Initiator: string(caller.ID), Target: string(id),
			Meta: map[string]string{"email": u.Email, "name": u.Name}})
		return err
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	s.o.Log.Info("user approved", "user", id, "by", caller.ID)
	return u, nil
}

// Reject removes a pending user (as Delete does), so that its next login
// joins again and waits again.
func (s *Service) Reject(ctx context.Context, caller account.User, id account.UserID) error {
	if err := require(caller, auth.Users, auth.Delete); err != nil {
		return err
	}
	now := s.now()
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		u, err := pendingUser(ctx, at, id)
		if err != nil {
			return err
		}
		if _, err := remove(ctx, tx, at, id, now); err != nil {
			return err
		}
		_, err = at.InsertEvent(ctx, account.Event{At: now, Activity: "user.reject", Initiator: string(caller.ID), Target: string(id),
			Meta: map[string]string{"email": u.Email, "name": u.Name}})
		return err
	})
	if err != nil {
		return mapErr(err)
	}
	s.o.Log.Info("user rejected", "user", id, "by", caller.ID)
	s.o.Notify.AccountChanged(caller.AccountID)
	return nil
}
