package users

import (
	"context"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// Agents' SSH servers learn who may log in with a token from the
// account's active users (the sshAuth management sends with a map, see
// grpcapi/sshauth.go), and maps go out for a new account serial only. So
// every change that lets a user in (a new user, an approval) bumps the
// serial; changes that let one out (block, delete) already do because
// they also change peers' access.

// sshEligible reports whether u is among the users sshAuth lists.
func sshEligible(u account.User) bool {
	return !u.Blocked && !u.ServiceUser && !u.PendingApproval
}

// insertUser stores the new user u and bumps the account's serial when u
// may log in to agents' SSH servers with a token.
func insertUser(ctx context.Context, at *store.AccountTx, u account.User) error {
	if err := at.InsertUser(ctx, u); err != nil {
		return err
	}
	if !sshEligible(u) {
		return nil
	}
	_, err := at.BumpSerial(ctx)
	return err
}
