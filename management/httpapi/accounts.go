package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/users"
)

// extraJSON is settings.extra: always sent with its five fields (the
// Terraform provider dereferences it).
type extraJSON struct {
	PeerApprovalEnabled                bool     `json:"peer_approval_enabled"`
	UserApprovalRequired               bool     `json:"user_approval_required"`
	NetworkTrafficLogsEnabled          bool     `json:"network_traffic_logs_enabled"`
	NetworkTrafficLogsGroups           []string `json:"network_traffic_logs_groups"`
	NetworkTrafficPacketCounterEnabled bool     `json:"network_traffic_packet_counter_enabled"`
}

type dashboardFeaturesJSON struct {
	AgentNetwork *bool `json:"agent_network,omitempty"`
}

// settingsJSON is AccountSettings, both ways. Responses carry every
// field of the spec (those this server does not implement at their
// defaults), their pointers always set. In a PUT, the pointers are the
// optional parts: an omitted dns_domain or network_range leaves the
// current value, an omitted extra leaves it unchanged; an omitted flag or
// list is its default (PUT replaces).
type settingsJSON struct {
	PeerLoginExpirationEnabled      bool     `json:"peer_login_expiration_enabled"`
	PeerLoginExpiration             int64    `json:"peer_login_expiration"`
	PeerInactivityExpirationEnabled bool     `json:"peer_inactivity_expiration_enabled"`
	PeerInactivityExpiration        int64    `json:"peer_inactivity_expiration"`
	RegularUsersViewBlocked         bool     `json:"regular_users_view_blocked"`
	PeerExposeEnabled               bool     `json:"peer_expose_enabled"`
	PeerExposeGroups                []string `json:"peer_expose_groups"`
	GroupsPropagationEnabled        bool     `json:"groups_propagation_enabled"`
	JWTGroupsEnabled                bool     `json:"jwt_groups_enabled"`
	JWTGroupsClaimName              string   `json:"jwt_groups_claim_name"`
	JWTAllowGroups                  []string `json:"jwt_allow_groups"`
	RoutingPeerDNSResolutionEnabled bool     `json:"routing_peer_dns_resolution_enabled"`
	DNSDomain                       *string  `json:"dns_domain"`
	NetworkRange                    *string  `json:"network_range"`
	// NetworkRangeV6 and IPv6EnabledGroups, omitted (or an empty range),
	// leave the current value, as NetBird.
	NetworkRangeV6        *string                `json:"network_range_v6"`
	IPv6EnabledGroups     *[]string              `json:"ipv6_enabled_groups"`
	Extra                 *extraJSON             `json:"extra"`
	LazyConnectionEnabled bool                   `json:"lazy_connection_enabled"`
	AutoUpdateVersion     string                 `json:"auto_update_version"`
	AutoUpdateAlways      bool                   `json:"auto_update_always"`
	MetricsPushEnabled    bool                   `json:"metrics_push_enabled"`
	AgentNetworkOnly      bool                   `json:"agent_network_only"`
	DashboardFeatures     *dashboardFeaturesJSON `json:"dashboard_features"`
	// EmbeddedIdPEnabled and LocalAuthDisabled describe the server: a PUT
	// cannot change them, it is ignored there.
	EmbeddedIdPEnabled bool `json:"embedded_idp_enabled"`
	LocalAuthDisabled  bool `json:"local_auth_disabled"`
	LocalMFAEnabled    bool `json:"local_mfa_enabled"`
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

// autoUpdateDisabled is the one auto_update_version this server accepts.
const autoUpdateDisabled = "disabled"

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// prefixOrEmpty prints an unset prefix as "" (not "invalid Prefix").
func prefixOrEmpty(p netip.Prefix) string {
	if !p.IsValid() {
		return ""
	}
	return p.String()
}

func (a *API) toAccount(acc account.Account, owner, claimed string) accountJSON {
	s := acc.Settings
	domain, network := acc.Domain, acc.Network.String()
	network6, groups6 := prefixOrEmpty(acc.NetworkV6), make([]string, 0, len(s.IPv6EnabledGroups))
	for _, g := range s.IPv6EnabledGroups {
		groups6 = append(groups6, string(g))
	}
	return accountJSON{ID: string(acc.ID), Domain: acc.Domain, DomainCategory: "private", CreatedAt: ts(acc.CreatedAt), CreatedBy: owner, ClaimedDomain: claimed,
		Onboarding: map[string]bool{"signup_form_pending": false, "onboarding_flow_pending": false},
		Settings: settingsJSON{
			PeerLoginExpirationEnabled: s.PeerLoginExpirationEnabled, PeerLoginExpiration: s.PeerLoginExpiration,
			PeerInactivityExpirationEnabled: s.PeerInactivityExpirationEnabled, PeerInactivityExpiration: s.PeerInactivityExpiration,
			RegularUsersViewBlocked: s.RegularUsersViewBlocked, PeerExposeGroups: []string{},
			GroupsPropagationEnabled: s.GroupsPropagationEnabled,
			JWTGroupsEnabled:         s.JWTGroupsEnabled, JWTGroupsClaimName: s.JWTGroupsClaimName, JWTAllowGroups: orEmpty(s.JWTAllowGroups),
			RoutingPeerDNSResolutionEnabled: s.RoutingPeerDNSResolutionEnabled,
			DNSDomain:                       &domain, NetworkRange: &network, NetworkRangeV6: &network6, IPv6EnabledGroups: &groups6,
			Extra: &extraJSON{PeerApprovalEnabled: s.Extra.PeerApprovalEnabled, UserApprovalRequired: s.Extra.UserApprovalRequired,
				NetworkTrafficLogsGroups: []string{}},
			LazyConnectionEnabled: s.LazyConnectionEnabled, AutoUpdateVersion: autoUpdateDisabled, LocalMFAEnabled: s.LocalMFAEnabled,
			DashboardFeatures:  &dashboardFeaturesJSON{},
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
	acc, err := a.callerAccount(r.Context(), caller)
	if err != nil {
		return err
	}
	claimed, err := a.o.Users.ClaimedDomain(r.Context(), caller)
	if err != nil {
		return err
	}
	return ok(w, []accountJSON{a.toAccount(acc, a.owner(r, acc.ID), claimed)})
}

// unsupported refuses the settings this server does not implement when a
// request moves them away from their defaults, naming the field.
func (s *settingsJSON) unsupported() error {
	refuse := func(field, why string) error {
		return fmt.Errorf("%w: %s is not supported by this server (%s)", users.ErrInvalid, field, why)
	}
	switch {
	case s.PeerExposeEnabled:
		return refuse("peer_expose_enabled", "there is no reverse proxy")
	case len(s.PeerExposeGroups) > 0:
		return refuse("peer_expose_groups", "there is no reverse proxy")
	case s.AutoUpdateVersion != "" && s.AutoUpdateVersion != autoUpdateDisabled:
		return refuse("auto_update_version", `client auto-update is not implemented; send "disabled"`)
	case s.AutoUpdateAlways:
		return refuse("auto_update_always", "client auto-update is not implemented")
	case s.MetricsPushEnabled:
		return refuse("metrics_push_enabled", "client metrics push is not implemented")
	case s.AgentNetworkOnly:
		return refuse("agent_network_only", "the agent network is a cloud feature")
	case s.DashboardFeatures != nil && s.DashboardFeatures.AgentNetwork != nil && *s.DashboardFeatures.AgentNetwork:
		return refuse("dashboard_features.agent_network", "the agent network is a cloud feature")
	}
	if e := s.Extra; e != nil {
		switch {
		case e.NetworkTrafficLogsEnabled:
			return refuse("extra.network_traffic_logs_enabled", "traffic logs are not implemented")
		case len(e.NetworkTrafficLogsGroups) > 0:
			return refuse("extra.network_traffic_logs_groups", "traffic logs are not implemented")
		case e.NetworkTrafficPacketCounterEnabled:
			return refuse("extra.network_traffic_packet_counter_enabled", "traffic logs are not implemented")
		}
	}
	return nil
}

// update turns the request into the domain's account update.
func (s *settingsJSON) update() (peers.AccountUpdate, error) {
	if err := s.unsupported(); err != nil {
		return peers.AccountUpdate{}, err
	}
	set := account.Settings{
		PeerLoginExpirationEnabled: s.PeerLoginExpirationEnabled, PeerLoginExpiration: s.PeerLoginExpiration,
		PeerInactivityExpirationEnabled: s.PeerInactivityExpirationEnabled, PeerInactivityExpiration: s.PeerInactivityExpiration,
		RegularUsersViewBlocked: s.RegularUsersViewBlocked, GroupsPropagationEnabled: s.GroupsPropagationEnabled,
		JWTGroupsEnabled: s.JWTGroupsEnabled, JWTGroupsClaimName: s.JWTGroupsClaimName,
		RoutingPeerDNSResolutionEnabled: s.RoutingPeerDNSResolutionEnabled, LazyConnectionEnabled: s.LazyConnectionEnabled,
		LocalMFAEnabled: s.LocalMFAEnabled,
	}
	if len(s.JWTAllowGroups) > 0 {
		set.JWTAllowGroups = s.JWTAllowGroups
	}
	if s.Extra != nil {
		set.Extra = account.Extra{PeerApprovalEnabled: s.Extra.PeerApprovalEnabled, UserApprovalRequired: s.Extra.UserApprovalRequired}
	}
	keepExtra := s.Extra == nil // as NetBird: no extra, no change to it
	if s.IPv6EnabledGroups != nil {
		for _, g := range *s.IPv6EnabledGroups {
			if !slices.Contains(set.IPv6EnabledGroups, account.GroupID(g)) {
				set.IPv6EnabledGroups = append(set.IPv6EnabledGroups, account.GroupID(g))
			}
		}
	}
	// Durations are bounded before any conversion, which would wrap.
	if err := set.Validate(); err != nil {
		return peers.AccountUpdate{}, fmt.Errorf("%w: %w", users.ErrInvalid, err)
	}
	u := peers.AccountUpdate{Settings: set, KeepExtra: keepExtra, KeepIPv6Groups: s.IPv6EnabledGroups == nil}
	if s.NetworkRangeV6 != nil && *s.NetworkRangeV6 != "" {
		p, err := account.ParseNetworkRangeV6(*s.NetworkRangeV6)
		if err != nil {
			return peers.AccountUpdate{}, fmt.Errorf("%w: %w", users.ErrInvalid, err)
		}
		u.NetworkV6 = p
	}
	if s.DNSDomain != nil {
		u.Domain = account.DefaultDomain
		if *s.DNSDomain != "" {
			d, err := account.ParseDNSDomain(*s.DNSDomain)
			if err != nil {
				return peers.AccountUpdate{}, fmt.Errorf("%w: %w", users.ErrInvalid, err)
			}
			u.Domain = d
		}
	}
	if s.NetworkRange != nil && *s.NetworkRange != "" {
		p, err := account.ParseNetworkRange(*s.NetworkRange)
		if err != nil {
			return peers.AccountUpdate{}, fmt.Errorf("%w: %w", users.ErrInvalid, err)
		}
		u.Network = p
	}
	return u, nil
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
	if req.Settings.LocalMFAEnabled && !a.o.Users.LocalIdP() {
		return fmt.Errorf("%w: local_mfa_enabled needs the built-in identity provider (users of an external one set up their second factor there)", users.ErrInvalid)
	}
	u, err := req.Settings.update()
	if err != nil {
		return err
	}
	if u.Network.IsValid() {
		// Checked again in the update's transaction; here so that a range
		// too small stores nothing, the claimed domain included.
		if err := a.checkCapacity(r, caller.AccountID, u.Network); err != nil {
			return err
		}
	}
	if u.Domain != "" {
		// Checked again in the update's transaction; here so that a
		// clash stores nothing, the claimed domain included.
		err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
			return peers.CheckDomainZones(r.Context(), tx.In(caller.AccountID), u.Domain)
		})
		if err != nil {
			return err
		}
	}
	if req.ClaimedDomain != nil {
		if err := a.o.Users.ClaimDomain(r.Context(), caller, *req.ClaimedDomain); err != nil {
			return err
		}
	}
	acc, err := a.o.Peers.UpdateAccount(r.Context(), caller.AccountID, u, string(caller.ID))
	if err != nil {
		return err
	}
	claimed, err := a.o.Users.ClaimedDomain(r.Context(), caller)
	if err != nil {
		return err
	}
	return ok(w, a.toAccount(acc, a.owner(r, acc.ID), claimed))
}

func (a *API) checkCapacity(r *http.Request, acc account.ID, network netip.Prefix) error {
	var n int
	err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		ps, err := tx.In(acc).Peers(r.Context())
		n = len(ps)
		return err
	})
	if err != nil {
		return err
	}
	if n > account.Hosts(network) {
		return fmt.Errorf("%w: network_range %s holds %d peer addresses, the account has %d peers", users.ErrInvalid, network, account.Hosts(network), n)
	}
	return nil
}

// deleteAccount removes the caller's account and everything in it (owner
// only).
func (a *API) deleteAccount(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := a.o.Users.DeleteAccount(r.Context(), caller, account.ID(r.PathValue("accountId"))); err != nil {
		return err
	}
	return ok(w, struct{}{})
}
