package oidcop

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// RefreshToken is a refresh token as its store keeps it: by the SHA-256 of
// the token, in a family that is one login and all its rotations.
type RefreshToken struct {
	Hash, Family, Subject, ClientID string
	Scopes, AMR                     []string
	AuthTime, Created               time.Time
	// Expires ends this token (it is idle that long); FamilyExpires ends
	// the login however often it is refreshed.
	Expires, FamilyExpires time.Time
	// Used is set once the token was rotated.
	Used bool
	// AccessID is the access token issued with it, revoked with the family.
	AccessID      string
	AccessExpires time.Time
}

// ErrRefreshNotCurrent is returned by RefreshStore.Rotate when the token
// was rotated already (or is gone): a second use.
var ErrRefreshNotCurrent = errors.New("refresh token already used")

// RefreshStore keeps refresh tokens where every instance of the provider
// sees them. Without one the provider issues no refresh tokens.
type RefreshStore interface {
	// Start stores the first token of a new family; when subject then has
	// more than maxFamilies families, the oldest are revoked.
	Start(ctx context.Context, t RefreshToken, maxFamilies int, now time.Time) error
	// ByHash finds a token, used or not; any error means it is unknown.
	ByHash(ctx context.Context, hash string) (RefreshToken, error)
	// Rotate marks oldHash used and stores next, atomically; when oldHash
	// is not current it stores nothing and returns ErrRefreshNotCurrent.
	Rotate(ctx context.Context, oldHash string, next RefreshToken, now time.Time) error
	// RevokeFamily deletes a family and revokes its access tokens.
	RevokeFamily(ctx context.Context, family string, now time.Time) error
	// RevokeOf deletes subject's tokens for clientID ("": all clients)
	// and revokes their access tokens.
	RevokeOf(ctx context.Context, subject, clientID string, now time.Time) error
}

// Refresh token lifetimes: a token not used for RefreshIdle is dead, and a
// login ends after RefreshMaxAge however often it is refreshed.
const (
	defaultRefreshIdle   = 14 * 24 * time.Hour
	defaultRefreshMaxAge = 90 * 24 * time.Hour
	// defaultMaxRefreshFamilies bounds the logins with refresh tokens a
	// user keeps (each browser or device is one); the oldest go first.
	defaultMaxRefreshFamilies = 20
)

// refreshPrefix marks a refresh family ID where pkg/op passes token IDs,
// so that revocation tells it from an access token's jti.
const refreshPrefix = "refresh:"

// HashRefreshToken is what a store keys a refresh token by.
func HashRefreshToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

func newRefreshToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return "wmrt_" + base64.RawURLEncoding.EncodeToString(b)
}

// refreshRequest is a validated refresh token, as pkg/op asks for it.
type refreshRequest struct {
	t      RefreshToken
	scopes []string
}

func (r *refreshRequest) GetAMR() []string             { return r.t.AMR }
func (r *refreshRequest) GetAudience() []string        { return []string{r.t.ClientID} }
func (r *refreshRequest) GetAuthTime() time.Time       { return r.t.AuthTime }
func (r *refreshRequest) GetClientID() string          { return r.t.ClientID }
func (r *refreshRequest) GetScopes() []string          { return r.scopes }
func (r *refreshRequest) GetSubject() string           { return r.t.Subject }
func (r *refreshRequest) SetCurrentScopes(sc []string) { r.scopes = sc }
func (r *refreshRequest) expired(now time.Time) bool {
	return now.After(r.t.Expires) || now.After(r.t.FamilyExpires)
}
func (r *refreshRequest) tokenHash() string { return r.t.Hash }

// TokenRequestByRefreshToken validates a presented refresh token. A token
// presented again after it was rotated is reuse, the sign of a stolen
// token: its whole family (the login) is revoked, so that neither the
// thief nor the victim can go on without logging in again.
func (s *storage) TokenRequestByRefreshToken(ctx context.Context, token string) (op.RefreshTokenRequest, error) {
	if s.refresh == nil || !strings.HasPrefix(token, "wmrt_") {
		return nil, op.ErrInvalidRefreshToken
	}
	t, err := s.refresh.ByHash(ctx, HashRefreshToken(token))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", op.ErrInvalidRefreshToken, err)
	}
	now := s.now()
	if t.Used {
		s.reused(ctx, t, now)
		return nil, op.ErrInvalidRefreshToken
	}
	r := &refreshRequest{t: t, scopes: slices.Clone(t.Scopes)}
	if r.expired(now) {
		return nil, op.ErrInvalidRefreshToken
	}
	return r, nil
}

// reused revokes the family of a token presented after its rotation.
func (s *storage) reused(ctx context.Context, t RefreshToken, now time.Time) {
	s.refreshReuse.Add(1)
	s.log.Warn("refresh token reused: its login is revoked", "subject", t.Subject, "client", t.ClientID, "family", t.Family)
	if err := s.refresh.RevokeFamily(ctx, t.Family, now); err != nil {
		s.log.Error("revoking a reused refresh token's family failed", "family", t.Family, "err", err)
	}
}

// CreateAccessAndRefreshTokens issues an access token with a refresh
// token: a new family after a login (code or device flow), or the next
// token of the family when a refresh token is used (rotation).
func (s *storage) CreateAccessAndRefreshTokens(ctx context.Context, req op.TokenRequest, current string) (string, string, time.Time, error) {
	if s.refresh == nil {
		return "", "", time.Time{}, oidc.ErrUnsupportedGrantType().WithDescription("refresh tokens are not issued")
	}
	now := s.now()
	accessID, exp := newID(), now.Add(s.tokenTTL)
	token := newRefreshToken()
	next := RefreshToken{Hash: HashRefreshToken(token), Subject: req.GetSubject(), Created: now,
		Expires: now.Add(s.refreshIdle), AccessID: accessID, AccessExpires: exp}
	if current != "" {
		rr, ok := req.(*refreshRequest)
		if !ok || rr.tokenHash() != HashRefreshToken(current) {
			return "", "", time.Time{}, oidc.ErrInvalidGrant()
		}
		next.Family, next.ClientID, next.Scopes, next.AMR = rr.t.Family, rr.t.ClientID, rr.t.Scopes, rr.t.AMR
		next.AuthTime, next.FamilyExpires = rr.t.AuthTime, rr.t.FamilyExpires
		if next.Expires.After(next.FamilyExpires) {
			next.Expires = next.FamilyExpires
		}
		err := s.refresh.Rotate(ctx, rr.tokenHash(), next, now)
		if errors.Is(err, ErrRefreshNotCurrent) {
			// Two uses at once: the loser is a reuse.
			s.reused(ctx, rr.t, now)
			return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("the refresh token was already used")
		}
		if err != nil {
			return "", "", time.Time{}, oidc.ErrServerError().WithParent(err).WithDescription("the token could not be refreshed; try again")
		}
		return accessID, token, exp, nil
	}
	next.Family = newID()
	next.FamilyExpires = now.Add(s.refreshMaxAge)
	switch r := req.(type) {
	case *authRequest:
		next.ClientID, next.Scopes, next.AMR, next.AuthTime = r.GetClientID(), r.GetScopes(), r.GetAMR(), r.GetAuthTime()
	case *op.DeviceAuthorizationState:
		next.ClientID, next.Scopes, next.AMR, next.AuthTime = r.ClientID, r.Scopes, r.AMR, r.AuthTime
	default:
		return "", "", time.Time{}, oidc.ErrInvalidGrant().WithDescription("refresh tokens are issued for logins only")
	}
	if err := s.refresh.Start(ctx, next, s.limits.MaxRefreshFamilies, now); err != nil {
		return "", "", time.Time{}, oidc.ErrServerError().WithParent(err).WithDescription("the login could not be stored; try again")
	}
	return accessID, token, exp, nil
}

// GetRefreshTokenInfo serves the revocation endpoint: a refresh token of
// the calling client becomes its family's ID.
func (s *storage) GetRefreshTokenInfo(ctx context.Context, clientID, token string) (string, string, error) {
	if s.refresh == nil || !strings.HasPrefix(token, "wmrt_") {
		return "", "", op.ErrInvalidRefreshToken
	}
	t, err := s.refresh.ByHash(ctx, HashRefreshToken(token))
	if err != nil || t.ClientID != clientID {
		return "", "", op.ErrInvalidRefreshToken
	}
	return t.Subject, refreshPrefix + t.Family, nil
}

// TerminateSession ends a user's sessions at a client (RP-initiated
// logout): its refresh tokens are deleted and the access tokens last
// issued from them revoked. The provider keeps no login session of its
// own (every authorization asks for credentials), so there is nothing
// else to end.
func (s *storage) TerminateSession(ctx context.Context, userID, clientID string) error {
	if s.refresh == nil || userID == "" {
		return nil
	}
	if err := s.refresh.RevokeOf(ctx, userID, clientID, s.now()); err != nil {
		return fmt.Errorf("logout: %w", err)
	}
	s.log.Info("logout", "subject", userID, "client", clientID)
	return nil
}
