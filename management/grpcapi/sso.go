package grpcapi

import (
	"context"
	"errors"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Flows describe the identity provider to agents, for the device flow and
// the PKCE authorization-code flow.
type Flows struct {
	ClientID, Audience, Scope                                string
	AuthorizationEndpoint, TokenEndpoint, DeviceAuthEndpoint string
	RedirectURLs                                             []string
	UseIDToken                                               bool
}

// SSO is what login through an identity provider needs.
type SSO interface {
	// LoginUser verifies a token (ID or access JWT) and returns its user,
	// created on first sight.
	LoginUser(ctx context.Context, jwt string) (account.User, error)
	// Flows describes the provider (it may need discovery).
	Flows(ctx context.Context) (Flows, error)
}

// Errors an SSO implementation wraps.
var (
	// ErrSSOToken: the token was refused.
	ErrSSOToken = errors.New("SSO token refused")
	// ErrSSOUnavailable: the identity provider cannot be reached now.
	ErrSSOUnavailable = errors.New("identity provider unavailable")
)

func (s *Server) flows(ctx context.Context) (Flows, error) {
	if s.o.SSO == nil {
		return Flows{}, status.Error(codes.NotFound, "no SSO provider is configured; use a setup key")
	}
	f, err := s.o.SSO.Flows(ctx)
	if err != nil {
		s.o.Log.WarnContext(ctx, "SSO provider unavailable", "err", err)
		return Flows{}, status.Error(codes.Unavailable, "identity provider unavailable: "+err.Error())
	}
	return f, nil
}

func (f Flows) config() *mgmtpb.ProviderConfig {
	return &mgmtpb.ProviderConfig{ClientID: f.ClientID, Audience: f.Audience, Scope: f.Scope, UseIDToken: f.UseIDToken,
		AuthorizationEndpoint: f.AuthorizationEndpoint, TokenEndpoint: f.TokenEndpoint, DeviceAuthEndpoint: f.DeviceAuthEndpoint,
		RedirectURLs: f.RedirectURLs}
}

// GetDeviceAuthorizationFlow describes the device flow (RFC 8628).
func (s *Server) GetDeviceAuthorizationFlow(ctx context.Context, req *mgmtpb.EncryptedMessage) (*mgmtpb.EncryptedMessage, error) {
	var r mgmtpb.DeviceAuthorizationFlowRequest
	_, sh, err := s.open(req, &r)
	if err != nil {
		return nil, err
	}
	f, err := s.flows(ctx)
	if err != nil {
		return nil, err
	}
	if f.DeviceAuthEndpoint == "" {
		return nil, status.Error(codes.NotFound, "the identity provider offers no device authorization endpoint")
	}
	return s.seal(sh, &mgmtpb.DeviceAuthorizationFlow{Provider: mgmtpb.DeviceAuthorizationFlow_HOSTED, ProviderConfig: f.config()})
}

// GetPKCEAuthorizationFlow describes the authorization-code flow with PKCE.
func (s *Server) GetPKCEAuthorizationFlow(ctx context.Context, req *mgmtpb.EncryptedMessage) (*mgmtpb.EncryptedMessage, error) {
	var r mgmtpb.PKCEAuthorizationFlowRequest
	_, sh, err := s.open(req, &r)
	if err != nil {
		return nil, err
	}
	f, err := s.flows(ctx)
	if err != nil {
		return nil, err
	}
	if f.AuthorizationEndpoint == "" || len(f.RedirectURLs) == 0 {
		return nil, status.Error(codes.NotFound, "the identity provider is not set up for the PKCE flow")
	}
	return s.seal(sh, &mgmtpb.PKCEAuthorizationFlow{ProviderConfig: f.config()})
}

// ssoUser verifies the JWT of a Login.
func (s *Server) ssoUser(ctx context.Context, jwt string) (*account.User, error) {
	if s.o.SSO == nil {
		return nil, status.Error(codes.PermissionDenied, "SSO login is not configured on this server; use a setup key")
	}
	u, err := s.o.SSO.LoginUser(ctx, jwt)
	switch {
	case err == nil:
		return &u, nil
	case errors.Is(err, ErrSSOToken):
		return nil, status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, store.ErrUnavailable):
		return nil, status.Error(codes.Unavailable, "management store temporarily unavailable, retry")
	case errors.Is(err, ErrSSOUnavailable):
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	s.o.Log.ErrorContext(ctx, "SSO login", "err", err)
	return nil, status.Error(codes.Internal, "SSO login failed")
}

// checkAccess refuses a peer whose user is blocked or whose login expired,
// with the PermissionDenied the official client turns into "log in again".
// It returns when the login expires (zero: never).
func (s *Server) checkAccess(ctx context.Context, p account.Peer) (time.Time, error) {
	if p.UserID == "" {
		return time.Time{}, nil // setup-key peers: nothing to read
	}
	var (
		acc  account.Account
		user account.User
	)
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(p.AccountID)
		var err error
		if acc, err = at.Account(ctx); err != nil {
			return err
		}
		// Its stored state: connected or not decides inactivity.
		if cur, err := at.Peer(ctx, p.ID); err == nil {
			p = cur
		}
		user, err = at.User(ctx, p.UserID)
		if errors.Is(err, store.ErrNotFound) {
			err = nil
		}
		return err
	})
	if err != nil {
		return time.Time{}, status.Error(codes.Unavailable, "management store temporarily unavailable, retry")
	}
	if user.Blocked {
		return time.Time{}, status.Error(codes.PermissionDenied, peers.ErrUserBlocked.Error())
	}
	exp := acc.Settings.LoginExpiry(p)
	if acc.Settings.Expired(p, s.o.Now()) {
		return time.Time{}, status.Error(codes.PermissionDenied, peers.ErrLoginExpired.Error())
	}
	return exp, nil
}
