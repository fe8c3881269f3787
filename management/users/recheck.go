package users

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
)

// Long-lived requests (the REST API's live event streams) check their
// credentials again while they run. These checks only read: they do not
// touch a token's last use or a user's last login (the request that
// opened the stream did), do not create or sync users, and so cost a
// read transaction, not a write, however many streams are open.

// CheckPAT returns the current user behind a personal access token the
// caller authenticated with before: it fails as FromPAT does when the
// token was deleted or expired or its user blocked, deleted or pending
// approval.
func (s *Service) CheckPAT(ctx context.Context, plain string) (account.User, error) {
	hash, err := auth.ParsePAT(plain)
	if err != nil {
		return account.User{}, fmt.Errorf("%w: %w", ErrUnauthenticated, err)
	}
	now := s.now()
	var u account.User
	err = s.o.Store.Read(ctx, func(tx *store.Tx) error {
		u, _, err = patUser(ctx, tx, hash, now)
		return err
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	return u, nil
}

// patUser is the usable user behind the token with hash, valid at now:
// the one check FromPAT and CheckPAT share (FromPAT then records the use).
func patUser(ctx context.Context, tx *store.Tx, hash string, now time.Time) (account.User, account.Token, error) {
	t, err := tx.TokenByHash(ctx, hash)
	if errors.Is(err, store.ErrNotFound) {
		return account.User{}, account.Token{}, fmt.Errorf("%w: unknown or deleted token", ErrUnauthenticated)
	}
	if err != nil {
		return account.User{}, account.Token{}, err
	}
	if !t.ExpiresAt.IsZero() && now.After(t.ExpiresAt) {
		return account.User{}, account.Token{}, fmt.Errorf("%w: token expired at %s", ErrUnauthenticated, t.ExpiresAt.Format(time.RFC3339))
	}
	u, err := tx.In(t.AccountID).User(ctx, t.UserID)
	if err != nil {
		return account.User{}, account.Token{}, err
	}
	if err := usable(u); err != nil {
		return account.User{}, account.Token{}, err
	}
	return u, t, nil
}

// CheckClaims returns the current user behind verified token claims the
// caller authenticated with before: it fails when the token or its
// subject was revoked, or the user was deleted, blocked or is pending
// approval. It never creates a user: one that does not exist is gone.
func (s *Service) CheckClaims(ctx context.Context, c auth.Claims) (account.User, error) {
	var u account.User
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		u, err = tx.UserByID(ctx, account.UserID(c.Subject))
		if errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("%w: the user was deleted", ErrUnauthenticated)
		}
		if err != nil {
			return err
		}
		if err := checkRevoked(ctx, tx, c); err != nil {
			return err
		}
		return usable(u)
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	return u, nil
}

// usable refuses a blocked user or one waiting for approval.
func usable(u account.User) error {
	switch {
	case u.Blocked:
		return ErrBlocked
	case u.PendingApproval:
		return ErrPendingApproval
	}
	return nil
}
