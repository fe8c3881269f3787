package users

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// UpstreamLogin is a person an account's upstream identity provider (added
// to the built-in provider's login page) vouched for.
type UpstreamLogin struct {
	// ProviderID is the account's identity provider; Subject its sub,
	// unique only within that provider.
	ProviderID, Subject string
	Email, Name         string
	// EmailVerified: the provider vouches for Email (email_verified).
	EmailVerified bool
}

// JoinUpstream returns the user an upstream login is, in the account that
// added the provider: the user it logged in as before; else, for an
// address the provider verified, the account's invitation with that
// address (the user gets its role and groups) or an existing user with it
// that has no local login of its own (password or second factor) and is
// neither owner nor admin; else a new user with the user role, always
// pending approval. Any other existing user with the address is refused
// (ErrForbidden) and nothing changes: whoever controls a provider an admin
// added must not become the owner or bypass a password and second factor.
// A blocked user gets ErrBlocked, one pending approval ErrPendingApproval.
func (s *Service) JoinUpstream(ctx context.Context, acc account.ID, in UpstreamLogin) (account.User, error) {
	if in.Subject == "" {
		return account.User{}, fmt.Errorf("%w: the identity provider named no subject", ErrInvalid)
	}
	email := strings.TrimSpace(in.Email)
	now := s.now()
	var u account.User
	err := s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		id, err := tx.IdPLink(ctx, in.ProviderID, in.Subject)
		if err == nil {
			if u, err = at.User(ctx, id); err != nil {
				return err
			}
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if email == "" {
			return fmt.Errorf("%w: the identity provider gave no e-mail address; allow the email scope", ErrInvalid)
		}
		link := func() error { return tx.InsertIdPLink(ctx, in.ProviderID, in.Subject, u.ID) }
		unverified := fmt.Errorf("%w: %s is already a user or invited here; the identity provider must verify the address to log in as it",
			ErrForbidden, email)
		existing, err := at.UserByEmail(ctx, email)
		switch {
		case err == nil:
			if !in.EmailVerified || existing.ServiceUser {
				return unverified
			}
			if err := linkable(ctx, tx, existing); err != nil {
				return err
			}
			u = existing
			return link()
		case !errors.Is(err, store.ErrNotFound):
			return err
		}
		u = account.User{ID: account.UserID(uuid.NewString()), AccountID: acc, Email: email, EmailVerified: in.EmailVerified, Name: strings.TrimSpace(in.Name),
			Role: account.RoleUser, AutoGroups: []string{}, Issued: "jwt", CreatedAt: now, LastLogin: now}
		if u.Name == "" {
			u.Name = email
		}
		invites, err := at.Invites(ctx)
		if err != nil {
			return err
		}
		activity := "user.join"
		for _, v := range invites {
			if !strings.EqualFold(v.Email, email) {
				continue
			}
			if !in.EmailVerified {
				return unverified
			}
			u.Role, u.AutoGroups, activity = v.Role, v.AutoGroups, "user.invite.link.accept"
			if err := at.DeleteInvite(ctx, v.ID); err != nil {
				return err
			}
		}
		// Whoever the provider vouches for, an admin lets them in: a
		// broad provider (Google) would otherwise open the mesh to all.
		u.PendingApproval = activity == "user.join"
		if u.PendingApproval {
			if err := s.checkPendingCaps(ctx, tx, at, in.ProviderID, now); err != nil {
				return err
			}
		}
		if err := insertUser(ctx, at, u); err != nil {
			return err
		}
		if err := link(); err != nil {
			return err
		}
		meta := map[string]string{"email": u.Email, "role": string(u.Role), "identity_provider": in.ProviderID}
		if u.PendingApproval {
			meta["pending_approval"] = "true"
		}
		_, err = at.InsertEvent(ctx, account.Event{At: now, Activity: activity, Initiator: string(u.ID), Target: string(u.ID), Meta: meta})
		return err
	})
	if err != nil {
		return account.User{}, mapErr(err)
	}
	switch {
	case u.Blocked:
		return account.User{}, ErrBlocked
	case u.PendingApproval:
		return account.User{}, ErrPendingApproval
	}
	return u, nil
}

// errHasLocalLogin: an upstream login's verified address is an existing
// user's that it may not claim.
var errHasLocalLogin = errors.New("an account with this e-mail already exists here: log in with its password")

// linkable reports whether an upstream login with u's verified address may
// become u: not when u is an owner or admin, nor when u has a local login
// (password or TOTP factor) at the built-in provider, which the upstream
// login would otherwise bypass.
func linkable(ctx context.Context, tx *store.Tx, u account.User) error {
	if u.Role == account.RoleOwner || u.Role == account.RoleAdmin {
		return fmt.Errorf("%w: %w", ErrForbidden, errHasLocalLogin)
	}
	if _, err := tx.Credential(ctx, u.ID); !errors.Is(err, store.ErrNotFound) {
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %w", ErrForbidden, errHasLocalLogin)
	}
	if _, err := tx.TOTPFactor(ctx, string(u.ID)); !errors.Is(err, store.ErrNotFound) {
		if err != nil {
			return err
		}
		return fmt.Errorf("%w: %w", ErrForbidden, errHasLocalLogin)
	}
	return nil
}

// Caps on users waiting for approval that upstream logins create: a broad
// provider (any Google account) must not let strangers fill the store.
const (
	// MaxPendingPerAccount bounds an account's users waiting for approval.
	MaxPendingPerAccount = 1000
	// MaxPendingPerProviderHour bounds the new users waiting for approval
	// one upstream provider adds in an hour.
	MaxPendingPerProviderHour = 100
)

// checkPendingCaps refuses a new pending user past the caps
// (ErrTooManyPending), counting the refusal.
func (s *Service) checkPendingCaps(ctx context.Context, tx *store.Tx, at *store.AccountTx, providerID string, now time.Time) error {
	n, err := at.PendingUserCount(ctx)
	if err != nil {
		return err
	}
	if n >= MaxPendingPerAccount {
		s.pendingRefused.Add(1)
		return fmt.Errorf("%w: %d people already wait for an administrator's approval in this account; ask an administrator to approve or reject them first",
			ErrTooManyPending, n)
	}
	n, err = tx.PendingUpstreamJoins(ctx, providerID, now.Add(-time.Hour))
	if err != nil {
		return err
	}
	if n >= MaxPendingPerProviderHour {
		s.pendingRefused.Add(1)
		return fmt.Errorf("%w: %d new people logged in with this identity provider in the last hour and wait for approval; try again later",
			ErrTooManyPending, n)
	}
	return nil
}

// Metrics are the service's counters.
func (s *Service) Metrics() []metrics.Sample {
	return []metrics.Sample{{Name: "management_pending_users_refused_total", Kind: metrics.Counter, Value: float64(s.pendingRefused.Load()),
		Help: "upstream identity-provider logins refused because too many users wait for approval"}}
}
