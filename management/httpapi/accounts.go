package httpapi

import (
	"fmt"
	"net/http"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

type settingsJSON struct {
	PeerLoginExpirationEnabled      bool     `json:"peer_login_expiration_enabled"`
	PeerLoginExpiration             int64    `json:"peer_login_expiration"`
	PeerInactivityExpirationEnabled bool     `json:"peer_inactivity_expiration_enabled"`
	PeerInactivityExpiration        int64    `json:"peer_inactivity_expiration"`
	RegularUsersViewBlocked         bool     `json:"regular_users_view_blocked"`
	PeerExposeEnabled               bool     `json:"peer_expose_enabled"`
	PeerExposeGroups                []string `json:"peer_expose_groups"`
	JWTGroupsEnabled                bool     `json:"jwt_groups_enabled"`
	JWTGroupsClaimName              string   `json:"jwt_groups_claim_name"`
	EmbeddedIdPEnabled              bool     `json:"embedded_idp_enabled"`
	LocalAuthDisabled               bool     `json:"local_auth_disabled"`
}

type accountJSON struct {
	ID             string          `json:"id"`
	Settings       settingsJSON    `json:"settings"`
	Domain         string          `json:"domain"`
	DomainCategory string          `json:"domain_category"`
	CreatedAt      string          `json:"created_at"`
	CreatedBy      string          `json:"created_by"`
	Onboarding     map[string]bool `json:"onboarding"`
	// ClaimedDomain (an extension): verified e-mail addresses of this
	// domain join the account in domain account mode.
	ClaimedDomain string `json:"claimed_domain"`
}

func (a *API) toAccount(acc account.Account, owner, claimed string) accountJSON {
	s := acc.Settings
	return accountJSON{ID: string(acc.ID), Domain: acc.Domain, DomainCategory: "private", CreatedAt: ts(acc.CreatedAt), CreatedBy: owner, ClaimedDomain: claimed,
		Onboarding: map[string]bool{"signup_form_pending": false, "onboarding_flow_pending": false},
		Settings: settingsJSON{PeerLoginExpirationEnabled: s.PeerLoginExpirationEnabled, PeerLoginExpiration: s.PeerLoginExpiration,
			PeerExposeGroups: []string{}, JWTGroupsEnabled: s.JWTGroupsEnabled, JWTGroupsClaimName: s.JWTGroupsClaimName,
			EmbeddedIdPEnabled: a.o.Users.LocalIdP(), LocalAuthDisabled: !a.o.Users.LocalIdP()}}
}

func (a *API) owner(r *http.Request, acc account.ID) string {
	var owner string
	_ = a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		us, err := tx.In(acc).Users(r.Context())
		for _, u := range us {
			if u.Role == account.RoleOwner {
				owner = string(u.ID)
			}
		}
		return err
	})
	return owner
}

func (a *API) listAccounts(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var acc account.Account
	err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		acc, err = tx.In(caller.AccountID).Account(r.Context())
		return err
	})
	if err != nil {
		return err
	}
	claimed, err := a.o.Users.ClaimedDomain(r.Context(), caller)
	if err != nil {
		return err
	}
	return ok(w, []accountJSON{a.toAccount(acc, a.owner(r, acc.ID), claimed)})
}

func (a *API) updateAccount(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if account.ID(r.PathValue("accountId")) != caller.AccountID {
		return users.ErrNotFound
	}
	if err := requireAdmin(caller); err != nil {
		return err
	}
	var req struct {
		Settings      *settingsJSON `json:"settings"`
		ClaimedDomain *string       `json:"claimed_domain"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.Settings == nil {
		return fmt.Errorf("%w: settings are required", users.ErrInvalid)
	}
	s := req.Settings
	// Durations are bounded before any conversion, which would wrap.
	set := account.Settings{PeerLoginExpirationEnabled: s.PeerLoginExpirationEnabled, PeerLoginExpiration: s.PeerLoginExpiration,
		JWTGroupsEnabled: s.JWTGroupsEnabled, JWTGroupsClaimName: s.JWTGroupsClaimName}
	if err := set.Validate(); err != nil {
		return fmt.Errorf("%w: %w", users.ErrInvalid, err)
	}
	if s.PeerInactivityExpiration < 0 || s.PeerInactivityExpiration > account.MaxLoginExpiration {
		return fmt.Errorf("%w: peer_inactivity_expiration must be 0 to %d seconds", users.ErrInvalid, account.MaxLoginExpiration)
	}
	if req.ClaimedDomain != nil {
		if err := a.o.Users.ClaimDomain(r.Context(), caller, *req.ClaimedDomain); err != nil {
			return err
		}
	}
	acc, err := a.o.Peers.UpdateSettings(r.Context(), caller.AccountID, set, string(caller.ID))
	if err != nil {
		return err
	}
	claimed, err := a.o.Users.ClaimedDomain(r.Context(), caller)
	if err != nil {
		return err
	}
	return ok(w, a.toAccount(acc, a.owner(r, acc.ID), claimed))
}
