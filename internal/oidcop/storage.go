package oidcop

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// errNotFound marks a missing request, code or client for pkg/op.
type errNotFound string

func (e errNotFound) Error() string { return string(e) + " not found" }
func (errNotFound) IsNotFound()     {}

// authRequest is a pending authorization-code login.
type authRequest struct {
	id        string
	oidc      oidc.AuthRequest
	created   time.Time
	subject   string
	authTime  time.Time
	done      bool
	challenge *oidc.CodeChallenge
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.oidc.ClientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.oidc.ClientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.oidc.Nonce }
func (a *authRequest) GetRedirectURI() string                { return a.oidc.RedirectURI }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.oidc.ResponseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.oidc.ResponseMode }
func (a *authRequest) GetScopes() []string                   { return a.oidc.Scopes }
func (a *authRequest) GetState() string                      { return a.oidc.State }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// deviceAuth is a pending device authorization.
type deviceAuth struct {
	state    op.DeviceAuthorizationState
	userCode string
}

// Pending logins and device codes expire after this long.
const pendingLifetime = 10 * time.Minute

// storage implements op.Storage and op.DeviceAuthorizationStorage with
// pending state in memory and identities from the Directory.
type storage struct {
	dir      Directory
	key      *rsa.PrivateKey
	keyID    string
	clients  map[string]*Client
	tokenTTL time.Duration

	mu        sync.Mutex
	requests  map[string]*authRequest // by request ID
	codes     map[string]string       // code -> request ID
	devices   map[string]*deviceAuth  // by device code
	userCodes map[string]string       // user code -> device code
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// purge drops expired pending state. Callers hold mu.
func (s *storage) purge(now time.Time) {
	for id, r := range s.requests {
		if now.Sub(r.created) > pendingLifetime {
			delete(s.requests, id)
		}
	}
	for code, id := range s.codes {
		if _, ok := s.requests[id]; !ok {
			delete(s.codes, code)
		}
	}
	for dc, d := range s.devices {
		if now.After(d.state.Expires) {
			delete(s.devices, dc)
			delete(s.userCodes, d.userCode)
		}
	}
}

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if slices.Contains(r.Prompt, oidc.PromptNone) {
		// No sessions are kept: a login without a prompt cannot succeed.
		return nil, oidc.ErrLoginRequired()
	}
	req := &authRequest{id: newID(), oidc: *r, created: time.Now()}
	if r.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purge(req.created)
	s.requests[req.id] = req
	return req, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok {
		return nil, errNotFound("auth request")
	}
	return r, nil
}

func (s *storage) AuthRequestByCode(_ context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id, ok := s.codes[code]
	if !ok {
		return nil, errNotFound("code")
	}
	r, ok := s.requests[id]
	if !ok {
		return nil, errNotFound("auth request")
	}
	return r, nil
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.requests[id]; !ok {
		return errNotFound("auth request")
	}
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest is called once the code was exchanged: the code cannot
// be used twice.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

// completeLogin marks a pending login as authenticated by subject.
func (s *storage) completeLogin(id, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok || time.Since(r.created) > pendingLifetime {
		return errNotFound("login request")
	}
	r.subject, r.authTime, r.done = subject, time.Now(), true
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, _ op.TokenRequest) (string, time.Time, error) {
	return newID(), time.Now().Add(s.tokenTTL), nil
}

var errNoRefresh = errors.New("refresh tokens are not issued; log in again")

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errNoRefresh
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(context.Context, string, string) error { return nil }

func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error {
	// Access tokens are short-lived JWTs; blocking the user in management
	// is what takes access away.
	return nil
}

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct {
	id  string
	key *rsa.PublicKey
}

func (k publicKey) ID() string                         { return k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key }

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{id: s.keyID, key: s.key}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{id: s.keyID, key: &s.key.PublicKey}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	c, ok := s.clients[id]
	if !ok {
		return nil, errNotFound("client")
	}
	return c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, _ string) error {
	// Every client is public (PKCE or device code): there are no secrets.
	return fmt.Errorf("client %q has no secret", id)
}

func (s *storage) SetUserinfoFromScopes(context.Context, *oidc.UserInfo, string, string, []string) error {
	return nil
}

// SetUserinfoFromRequest fills the ID token's claims.
func (s *storage) SetUserinfoFromRequest(ctx context.Context, info *oidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	return s.userinfo(ctx, info, req.GetSubject(), scopes)
}

func (s *storage) SetUserinfoFromToken(ctx context.Context, info *oidc.UserInfo, _, subject, _ string) error {
	return s.userinfo(ctx, info, subject, []string{oidc.ScopeOpenID, oidc.ScopeEmail, oidc.ScopeProfile})
}

func (s *storage) userinfo(ctx context.Context, info *oidc.UserInfo, subject string, scopes []string) error {
	id, err := s.dir.Lookup(ctx, subject)
	if err != nil {
		return err
	}
	info.Subject = id.Subject
	for _, sc := range scopes {
		switch sc {
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = id.Email, oidc.Bool(true)
		case oidc.ScopeProfile:
			info.Name, info.PreferredUsername = id.Name, id.Email
		}
	}
	if len(id.Groups) > 0 {
		info.AppendClaims(GroupsClaim, id.Groups)
	}
	return nil
}

func (s *storage) SetIntrospectionFromToken(ctx context.Context, resp *oidc.IntrospectionResponse, _, subject, clientID string) error {
	var info oidc.UserInfo
	if err := s.userinfo(ctx, &info, subject, []string{oidc.ScopeEmail, oidc.ScopeProfile}); err != nil {
		return err
	}
	resp.SetUserInfo(&info)
	resp.ClientID = clientID
	resp.Active = true
	return nil
}

// GetPrivateClaimsFromScopes puts who the user is into the JWT access token,
// which is what management reads: e-mail, name and groups.
func (s *storage) GetPrivateClaimsFromScopes(ctx context.Context, subject, _ string, _ []string) (map[string]any, error) {
	id, err := s.dir.Lookup(ctx, subject)
	if err != nil {
		return nil, err
	}
	claims := map[string]any{"email": id.Email, "name": id.Name}
	if len(id.Groups) > 0 {
		claims[GroupsClaim] = id.Groups
	}
	return claims, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errors.New("JWT profile client authentication is not supported")
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("JWT profile grants are not supported")
}

func (s *storage) Health(context.Context) error { return nil }

// --- device authorization ---

func (s *storage) StoreDeviceAuthorization(_ context.Context, clientID, deviceCode, userCode string, expires time.Time, scopes []string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.purge(time.Now())
	if _, taken := s.userCodes[userCode]; taken {
		return op.ErrDuplicateUserCode
	}
	s.devices[deviceCode] = &deviceAuth{userCode: userCode, state: op.DeviceAuthorizationState{
		ClientID: clientID, Audience: []string{clientID}, Scopes: scopes, Expires: expires}}
	s.userCodes[userCode] = deviceCode
	return nil
}

// GetDeviceAuthorizatonState answers the device's polling. A completed
// authorization is handed out once and then forgotten, so a device code
// cannot be exchanged for a second set of tokens.
func (s *storage) GetDeviceAuthorizatonState(_ context.Context, clientID, deviceCode string) (*op.DeviceAuthorizationState, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.devices[deviceCode]
	if !ok || d.state.ClientID != clientID {
		return nil, errNotFound("device code")
	}
	st := d.state
	if st.Done || st.Denied {
		delete(s.devices, deviceCode)
		delete(s.userCodes, d.userCode)
	}
	return &st, nil
}

// completeDevice approves (or denies) the device authorization of a user
// code on behalf of subject.
func (s *storage) completeDevice(userCode, subject string, approve bool) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	dc, ok := s.userCodes[userCode]
	if !ok {
		return errNotFound("user code")
	}
	d := s.devices[dc]
	if d == nil || time.Now().After(d.state.Expires) || d.state.Done || d.state.Denied {
		return errNotFound("user code")
	}
	if !approve {
		d.state.Denied = true
		return nil
	}
	d.state.Done, d.state.Subject, d.state.AuthTime, d.state.AMR = true, subject, time.Now(), []string{"pwd"}
	return nil
}
