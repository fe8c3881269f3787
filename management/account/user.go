package account

import (
	"errors"
	"fmt"
	"time"
)

// UserID identifies a user: the subject the identity provider gives it (for
// service users, an ID we make). IdP subjects may contain '|', '@' or
// base64 characters; treat them as opaque.
type UserID string

// Role is what a user may do in its account.
type Role string

// The roles, the reference's (what each may do is package auth's
// table). An owner is an admin who cannot be removed or demoted by
// admins; a user sees and manages only its own peers; an auditor reads
// everything; a network admin manages the network (groups, policies,
// routes, DNS); a billing admin is, here, a user (there is no billing).
const (
	RoleOwner        Role = "owner"
	RoleAdmin        Role = "admin"
	RoleUser         Role = "user"
	RoleBillingAdmin Role = "billing_admin"
	RoleAuditor      Role = "auditor"
	RoleNetworkAdmin Role = "network_admin"
)

// Roles lists every role.
var Roles = []Role{RoleOwner, RoleAdmin, RoleUser, RoleBillingAdmin, RoleAuditor, RoleNetworkAdmin}

// ParseRole accepts the roles this server implements.
func ParseRole(s string) (Role, bool) {
	switch r := Role(s); r {
	case RoleOwner, RoleAdmin, RoleUser, RoleBillingAdmin, RoleAuditor, RoleNetworkAdmin:
		return r, true
	}
	return "", false
}

// IsAdmin reports whether the role manages the whole account.
func (r Role) IsAdmin() bool { return r == RoleOwner || r == RoleAdmin }

// User is a person (or, as a service user, a program) of an account.
type User struct {
	ID          UserID   `json:"id"`
	AccountID   ID       `json:"account_id"`
	Email       string   `json:"email"`
	Name        string   `json:"name"`
	Role        Role     `json:"role"`
	Blocked     bool     `json:"blocked"`
	ServiceUser bool     `json:"service_user"`
	AutoGroups  []string `json:"auto_groups"` // group IDs given to the peers this user registers
	Issued      string   `json:"issued"`      // "api" (created here) or "jwt" (first seen in a token)
	// PendingApproval: the user joined by its e-mail domain while the
	// account required approval; until an admin approves it, it may do
	// nothing (no API call, no peer).
	PendingApproval bool      `json:"pending_approval,omitempty"`
	CreatedAt       time.Time `json:"created_at"`
	LastLogin       time.Time `json:"last_login"`
	// EmailVerified: the identity provider vouched for Email (the
	// email_verified claim) when the user was last seen.
	EmailVerified bool `json:"email_verified,omitempty"`
}

// TokenID identifies a personal access token record (never its secret).
type TokenID string

// Token is a personal access token for the REST API. Only the hash of the
// secret is kept.
type Token struct {
	ID        TokenID   `json:"id"`
	AccountID ID        `json:"account_id"`
	UserID    UserID    `json:"user_id"`
	Name      string    `json:"name"`
	Hash      string    `json:"token_hash"`
	ExpiresAt time.Time `json:"expires_at"`
	CreatedBy UserID    `json:"created_by"`
	CreatedAt time.Time `json:"created_at"`
	LastUsed  time.Time `json:"last_used"`
}

// InviteID identifies an invitation.
type InviteID string

// Invite lets someone become a user of the built-in identity provider by
// choosing a password. Only the hash of the invite token is kept.
type Invite struct {
	ID         InviteID  `json:"id"`
	AccountID  ID        `json:"account_id"`
	Email      string    `json:"email"`
	Name       string    `json:"name"`
	Role       Role      `json:"role"`
	AutoGroups []string  `json:"auto_groups"`
	Hash       string    `json:"token_hash"`
	ExpiresAt  time.Time `json:"expires_at"`
	CreatedBy  UserID    `json:"created_by"`
	CreatedAt  time.Time `json:"created_at"`
}

// Credential is a local login of the built-in identity provider.
type Credential struct {
	Subject      UserID    `json:"subject"`
	Email        string    `json:"email"`
	Name         string    `json:"name"`
	PasswordHash string    `json:"password_hash"`
	CreatedAt    time.Time `json:"created_at"`
}

// Settings are an account's adjustable behaviour.
type Settings struct {
	// PeerLoginExpirationEnabled makes peers added by a user (SSO) log in
	// again after PeerLoginExpiration.
	PeerLoginExpirationEnabled bool `json:"peer_login_expiration_enabled"`
	// PeerLoginExpiration in seconds.
	PeerLoginExpiration int64 `json:"peer_login_expiration"`
	// JWTGroupsEnabled maps the IdP's groups claim to groups at each login.
	JWTGroupsEnabled   bool   `json:"jwt_groups_enabled"`
	JWTGroupsClaimName string `json:"jwt_groups_claim_name"`
	// JWTAllowGroups, when set with JWTGroupsEnabled, admits only users
	// whose groups claim names one of these groups.
	JWTAllowGroups []string `json:"jwt_allow_groups,omitempty"`
	// PeerInactivityExpirationEnabled makes peers added by a user (SSO)
	// log in again once disconnected for PeerInactivityExpiration seconds.
	PeerInactivityExpirationEnabled bool  `json:"peer_inactivity_expiration_enabled,omitempty"`
	PeerInactivityExpiration        int64 `json:"peer_inactivity_expiration,omitempty"`
	// RegularUsersViewBlocked: users with role user see only themselves
	// in the REST API (no peers, groups, policies...).
	RegularUsersViewBlocked bool `json:"regular_users_view_blocked,omitempty"`
	// GroupsPropagationEnabled: changes of a user's auto groups apply to
	// the peers that user added.
	// Stored even when false: absent (accounts older than it) means true.
	GroupsPropagationEnabled bool `json:"groups_propagation_enabled"`
	// RoutingPeerDNSResolutionEnabled and LazyConnectionEnabled are passed
	// to the clients in their peer config.
	RoutingPeerDNSResolutionEnabled bool `json:"routing_peer_dns_resolution_enabled,omitempty"`
	LazyConnectionEnabled           bool `json:"lazy_connection_enabled,omitempty"`
	// Extra holds the approval switches (see Extra).
	Extra Extra `json:"extra,omitzero"`
	// LocalMFAEnabled makes the built-in identity provider ask the
	// account's local users for a TOTP second factor, enrolling each at its
	// next password login.
	LocalMFAEnabled bool `json:"local_mfa_enabled,omitempty"`
	// IPv6EnabledGroups: peers in one of these groups that support the
	// IPv6 overlay (Peer.SupportsIPv6) get an address in the account's
	// NetworkV6. New accounts name the All group; accounts upgraded from
	// before the overlay none.
	IPv6EnabledGroups []GroupID `json:"ipv6_enabled_groups,omitempty"`
}

// DefaultSettings are a new account's settings: SSO peers log in again
// after 24 hours, as the reference.
func DefaultSettings() Settings {
	return Settings{PeerLoginExpirationEnabled: true, PeerLoginExpiration: 86400, GroupsPropagationEnabled: true,
		// As NetBird: routing peers resolve the names of the domain resources they serve.
		RoutingPeerDNSResolutionEnabled: true}
}

// MaxLoginExpiration bounds PeerLoginExpiration (in seconds: a year), so
// that it converts to a time.Duration without wrapping around.
const MaxLoginExpiration = 365 * 24 * 60 * 60

// ErrBadSettings: settings out of range.
var ErrBadSettings = errors.New("invalid account settings")

// Validate checks the settings' ranges; durations are bounded here, before
// anything converts them to a time.Duration.
func (s Settings) Validate() error {
	if s.PeerLoginExpiration < 0 || s.PeerLoginExpiration > MaxLoginExpiration || (s.PeerLoginExpirationEnabled && s.PeerLoginExpiration == 0) {
		return fmt.Errorf("%w: peer_login_expiration must be 1 to %d seconds", ErrBadSettings, MaxLoginExpiration)
	}
	return s.validateMore()
}

// LoginExpiry is when a peer added by a user must log in again (zero: never).
func (s Settings) LoginExpiry(p Peer) time.Time {
	if !s.PeerLoginExpirationEnabled || s.PeerLoginExpiration <= 0 || !p.LoginExpirationEnabled || p.UserID == "" {
		return time.Time{}
	}
	return p.LastLogin.Add(time.Duration(min(s.PeerLoginExpiration, MaxLoginExpiration)) * time.Second)
}
