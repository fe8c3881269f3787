package users

import (
	"context"
	"fmt"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
)

// ClaimedDomain is the e-mail domain the caller's account claimed ("" if
// none).
func (s *Service) ClaimedDomain(ctx context.Context, caller account.User) (string, error) {
	var d string
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		d, err = tx.In(caller.AccountID).ClaimedDomain(ctx)
		return err
	})
	return d, mapErr(err)
}

// ClaimDomain makes verified addresses of domain join the caller's account
// when they first log in (domain mode); "" drops the claim. An admin
// claims only the domain of its own verified address, never a public mail
// provider's, and a domain only one account at a time.
func (s *Service) ClaimDomain(ctx context.Context, caller account.User, domain string) error {
	if err := require(caller, auth.Settings, auth.Update); err != nil {
		return err
	}
	domain = strings.TrimSuffix(strings.ToLower(strings.TrimSpace(domain)), ".")
	if domain != "" {
		switch {
		case s.o.Mode != DomainAccounts:
			return fmt.Errorf("%w: domain claims apply only in domain account mode (--account-mode domain)", ErrInvalid)
		case !validDomain(domain):
			return fmt.Errorf("%w: %q is not an e-mail domain", ErrInvalid, domain)
		case publicMail[domain]:
			return fmt.Errorf("%w: %s is a public mail provider; its users do not share an account", ErrInvalid, domain)
		case emailDomain(caller.Email) != domain || !caller.EmailVerified:
			return fmt.Errorf("%w: an admin claims only the domain of its own verified e-mail address", ErrForbidden)
		}
	}
	now := s.now()
	return mapErr(s.o.Store.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(caller.AccountID)
		if err := at.ClaimDomain(ctx, domain); err != nil {
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{At: now, Activity: "account.domain.claim", Initiator: string(caller.ID),
			Target: string(caller.AccountID), Meta: map[string]string{"domain": domain}})
		return err
	}))
}
