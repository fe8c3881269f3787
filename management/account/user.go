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

// The roles. An owner is an admin who cannot be removed or demoted by
// admins; a user sees and manages only its own peers.
const (
	RoleOwner Role = "owner"
	RoleAdmin Role = "admin"
	RoleUser  Role = "user"
)

// ParseRole accepts the roles this server implements.
func ParseRole(s string) (Role, bool) {
	switch r := Role(s); r {
	case RoleOwner, RoleAdmin, RoleUser:
		return r, true
	}
	return "", false
}

// IsAdmin reports whether the role manages the whole account.
func (r Role) IsAdmin() bool { return r == RoleOwner || r == RoleAdmin }

// User is a person (or, as a service user, a program) of an account.
type User struct {
	ID          UserID    `json:"id"`
	AccountID   ID        `json:"account_id"`
	Email       string    `json:"email"`
	Name        string    `json:"name"`
	Role        Role      `json:"role"`
	Blocked     bool      `json:"blocked"`
	ServiceUser bool      `json:"service_user"`
	AutoGroups  []string  `json:"auto_groups"` // group IDs given to the peers this user registers
	Issued      string    `json:"issued"`      // "api" (created here) or "jwt" (first seen in a token)
	CreatedAt   time.Time `json:"created_at"`
	LastLogin   time.Time `json:"last_login"`
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
}

// DefaultSettings are a new account's settings: SSO peers log in again
// after 24 hours, as the reference.
func DefaultSettings() Settings {
	return Settings{PeerLoginExpirationEnabled: true, PeerLoginExpiration: 86400}
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
	return nil
}

// LoginExpiry is when a peer added by a user must log in again (zero: never).
func (s Settings) LoginExpiry(p Peer) time.Time {
	if !s.PeerLoginExpirationEnabled || s.PeerLoginExpiration <= 0 || !p.LoginExpirationEnabled || p.UserID == "" {
		return time.Time{}
	}
	return p.LastLogin.Add(time.Duration(min(s.PeerLoginExpiration, MaxLoginExpiration)) * time.Second)
}
