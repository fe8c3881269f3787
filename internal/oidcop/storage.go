package oidcop

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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
	code      string // the code issued for it, if any
	// factorSubject is set once the password was right and the login
	// waits for that subject's second factor.
	factorSubject, factorEmail string
	// factorFailures counts wrong codes given for it (see maxCodesPerLogin).
	factorFailures int
	pending
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
	pending
}

// pending is what an entry is charged against its source and the total.
type pending struct {
	src   netip.Addr
	bytes int
}

// usage is what one source holds.
type usage struct{ count, bytes int }

// slot is room reserved for one pending entry before pkg/op creates it:
// the entry takes it over, or the request's end gives it back.
type slot struct {
	pending
	taken bool
}

// Refusal reasons, counted in metrics.
var (
	errSourceFull = errors.New("too many pending logins from this address; finish or wait for them (10 minutes)")
	errAllFull    = errors.New("too many pending logins; try again in a few minutes")
)

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
	limits   Limits
	now      func() time.Time
	log      *slog.Logger
	// refresh keeps refresh tokens (nil: none are issued).
	refresh                    RefreshStore
	refreshIdle, refreshMaxAge time.Duration

	refusedSource, refusedAll, refusedFields, refreshReuse atomic.Int64

	mu        sync.Mutex
	requests  map[string]*authRequest   // by request ID
	codes     map[string]string         // code -> request ID
	devices   map[string]*deviceAuth    // by device code
	userCodes map[string]string         // user code -> device code
	upstream  map[string]*upstreamLogin // pending upstream logins by state
	// count and bytes are what all pending entries and reserved slots
	// hold; bySource the same per source address.
	count, bytes int
	bySource     map[netip.Addr]*usage
	lastPurge    time.Time
}

// purgeEvery spaces purges when nothing is full, so a flood does not
// make every request walk the tables.
const purgeEvery = time.Second

// reserve takes room for one pending entry of n bytes from src, or
// refuses when src or everyone holds too much.
func (s *storage) reserve(src netip.Addr, n int) (*slot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.admit(src, n); err != nil {
		return nil, err
	}
	return &slot{pending: pending{src: src, bytes: n}}, nil
}

// admit charges n bytes to src (s.mu held), purging expired entries first
// when that could make room.
func (s *storage) admit(src netip.Addr, n int) error {
	now := s.now()
	u := s.bySource[src]
	full := func() error {
		switch {
		case u != nil && (u.count+1 > s.limits.MaxPendingPerSource || u.bytes+n > s.limits.MaxPendingBytesPerSource):
			return errSourceFull
		case s.count+1 > s.limits.MaxPending || s.bytes+n > s.limits.MaxPendingBytes:
			return errAllFull
		}
		return nil
	}
	if full() != nil || now.Sub(s.lastPurge) > purgeEvery {
		s.purge(now)
		u = s.bySource[src]
	}
	if err := full(); err != nil {
		if errors.Is(err, errSourceFull) {
			s.refusedSource.Add(1)
		} else {
			s.refusedAll.Add(1)
		}
		return err
	}
	if u == nil {
		u = &usage{}
		s.bySource[src] = u
	}
	u.count++
	u.bytes += n
	s.count++
	s.bytes += n
	return nil
}

// uncharge gives back what p holds (s.mu held).
func (s *storage) uncharge(p pending) {
	s.count--
	s.bytes -= p.bytes
	if u := s.bySource[p.src]; u != nil {
		u.count--
		u.bytes -= p.bytes
		if u.count <= 0 {
			delete(s.bySource, p.src)
		}
	}
}

// release gives back a slot no entry took.
func (s *storage) release(sl *slot) {
	if sl == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !sl.taken {
		sl.taken = true
		s.uncharge(sl.pending)
	}
}

// take charges a new entry of n bytes (s.mu held): to the request's slot
// when it has one (adjusted to the entry's real size), else directly.
func (s *storage) take(ctx context.Context, n int) (pending, error) {
	sl := slotFrom(ctx)
	if sl == nil || sl.taken {
		p := pending{src: sourceFrom(ctx), bytes: n}
		return p, s.admit(p.src, n)
	}
	sl.taken = true
	d := n - sl.bytes
	s.bytes += d
	if u := s.bySource[sl.src]; u != nil {
		u.bytes += d
	}
	return pending{src: sl.src, bytes: n}, nil
}

func newID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// purge drops expired pending state. Callers hold mu.
func (s *storage) purge(now time.Time) {
	s.lastPurge = now
	for id, r := range s.requests {
		if now.Sub(r.created) > pendingLifetime {
			s.dropRequest(id, r)
		}
	}
	for dc, d := range s.devices {
		if now.After(d.state.Expires) {
			s.dropDevice(dc, d)
		}
	}
	for st, l := range s.upstream {
		if now.Sub(l.created) > pendingLifetime {
			s.dropUpstream(st, l)
		}
	}
}

// dropRequest forgets a pending login and its code (s.mu held).
func (s *storage) dropRequest(id string, r *authRequest) {
	delete(s.requests, id)
	if r.code != "" {
		delete(s.codes, r.code)
	}
	s.uncharge(r.pending)
}

// dropDevice forgets a device authorization (s.mu held).
func (s *storage) dropDevice(dc string, d *deviceAuth) {
	delete(s.devices, dc)
	delete(s.userCodes, d.userCode)
	s.uncharge(d.pending)
}

// Pending is what the provider holds for unfinished logins.
type Pending struct {
	AuthRequests, DeviceCodes, UpstreamLogins, Sources, Bytes int
}

func (s *storage) pendingNow() Pending {
	s.mu.Lock()
	defer s.mu.Unlock()
	return Pending{AuthRequests: len(s.requests), DeviceCodes: len(s.devices), UpstreamLogins: len(s.upstream), Sources: len(s.bySource), Bytes: s.bytes}
}

// checkAuthRequest bounds what a pending login keeps of a request.
func checkAuthRequest(r *oidc.AuthRequest) error {
	v := url.Values{
		"client_id": {r.ClientID}, "redirect_uri": {r.RedirectURI}, "state": {r.State}, "nonce": {r.Nonce},
		"scope": {strings.Join(r.Scopes, " ")}, "response_type": {string(r.ResponseType)},
		"response_mode": {string(r.ResponseMode)}, "code_challenge": {r.CodeChallenge},
		"code_challenge_method": {string(r.CodeChallengeMethod)},
	}
	if err := checkParams(v); err != nil {
		return oidc.ErrInvalidRequest().WithDescription("%s", err.Error())
	}
	return nil
}

// authRequestSize is what a pending login costs, roughly.
func authRequestSize(r *oidc.AuthRequest) int {
	n := entryOverhead + len(r.ClientID) + len(r.RedirectURI) + len(r.State) + len(r.Nonce) + len(r.CodeChallenge) + len(r.CodeChallengeMethod)
	for _, sc := range r.Scopes {
		n += len(sc) + 16
	}
	return n
}

func (s *storage) CreateAuthRequest(ctx context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	if slices.Contains(r.Prompt, oidc.PromptNone) {
		// No sessions are kept: a login without a prompt cannot succeed.
		return nil, oidc.ErrLoginRequired()
	}
	if err := checkAuthRequest(r); err != nil {
		s.refusedFields.Add(1)
		return nil, err
	}
	// Keep only what the flow needs: hints, locales and request objects
	// were used by validation and are not held for ten minutes.
	kept := oidc.AuthRequest{
		Scopes: slices.Clone(r.Scopes), ResponseType: r.ResponseType, ResponseMode: r.ResponseMode,
		ClientID: r.ClientID, RedirectURI: r.RedirectURI, State: r.State, Nonce: r.Nonce,
		CodeChallenge: r.CodeChallenge, CodeChallengeMethod: r.CodeChallengeMethod,
	}
	req := &authRequest{id: newID(), oidc: kept, created: s.now()}
	if r.CodeChallenge != "" {
		req.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	p, err := s.take(ctx, authRequestSize(&kept))
	if err != nil {
		return nil, &oidc.Error{ErrorType: "temporarily_unavailable", Description: err.Error(), Parent: err}
	}
	req.pending = p
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
	r, ok := s.requests[id]
	if !ok {
		return errNotFound("auth request")
	}
	// One code per request: a callback replayed does not grow the table.
	if r.code != "" {
		delete(s.codes, r.code)
	}
	r.code = code
	s.codes[code] = id
	return nil
}

// DeleteAuthRequest is called once the code was exchanged: the code cannot
// be used twice.
func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.requests[id]; ok {
		s.dropRequest(id, r)
	}
	return nil
}

// completeLogin marks a pending login as authenticated by subject.
func (s *storage) completeLogin(id, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.requests[id]
	if !ok || s.now().Sub(r.created) > pendingLifetime {
		return errNotFound("login request")
	}
	r.subject, r.authTime, r.done = subject, s.now(), true
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, _ op.TokenRequest) (string, time.Time, error) {
	return newID(), s.now().Add(s.tokenTTL), nil
}

// TokenRevoker is implemented by a Directory that records revoked access
// tokens where the services verifying them look (management's store), so
// that a revoked token stops working before it expires.
type TokenRevoker interface {
	RevokeAccessToken(ctx context.Context, tokenID, subject string, until time.Time) error
}

// RevokeToken serves the revocation endpoint (RFC 7009). pkg/op passes the
// jti and subject of an access token this provider signed and that has not
// expired; anything else (a foreign, forged or expired token) arrives
// without a subject and is ignored, as RFC 7009 asks, so that anonymous
// requests cannot fill the record. The record lasts as long as a token
// can live.
func (s *storage) RevokeToken(ctx context.Context, tokenID, subject, _ string) *oidc.Error {
	if family, ok := strings.CutPrefix(tokenID, refreshPrefix); ok && s.refresh != nil {
		// A refresh token (GetRefreshTokenInfo): its login ends, with the
		// access tokens issued from it (RFC 7009 §2.1).
		if err := s.refresh.RevokeFamily(ctx, family, s.now()); err != nil {
			return oidc.ErrServerError().WithParent(err).WithDescription("the token could not be revoked; try again")
		}
		return nil
	}
	r, ok := s.dir.(TokenRevoker)
	if !ok || subject == "" || tokenID == "" {
		return nil
	}
	if err := r.RevokeAccessToken(ctx, tokenID, subject, s.now().Add(s.tokenTTL)); err != nil {
		return oidc.ErrServerError().WithParent(err).WithDescription("the token could not be revoked; try again")
	}
	return nil
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
		// An OAuth error, so that pkg/op answers 4xx rather than 500.
		return nil, oidc.ErrInvalidClient().WithDescription("unknown client").WithParent(errNotFound("client"))
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

func (s *storage) StoreDeviceAuthorization(ctx context.Context, clientID, deviceCode, userCode string, expires time.Time, scopes []string) error {
	v := url.Values{"client_id": {clientID}, "device_code": {deviceCode}, "user_code": {userCode}, "scope": {strings.Join(scopes, " ")}}
	if err := checkParams(v); err != nil {
		s.refusedFields.Add(1)
		return oidc.ErrInvalidRequest().WithDescription("%s", err.Error())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, taken := s.userCodes[userCode]; taken {
		return op.ErrDuplicateUserCode
	}
	p, err := s.take(ctx, valuesSize(v))
	if err != nil {
		return &oidc.Error{ErrorType: "temporarily_unavailable", Description: err.Error(), Parent: err}
	}
	s.devices[deviceCode] = &deviceAuth{userCode: userCode, pending: p, state: op.DeviceAuthorizationState{
		ClientID: clientID, Audience: []string{clientID}, Scopes: slices.Clone(scopes), Expires: expires}}
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
		s.dropDevice(deviceCode, d)
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
	if d == nil || s.now().After(d.state.Expires) || d.state.Done || d.state.Denied {
		return errNotFound("user code")
	}
	if !approve {
		d.state.Denied = true
		return nil
	}
	d.state.Done, d.state.Subject, d.state.AuthTime, d.state.AMR = true, subject, s.now(), []string{"pwd"}
	return nil
}
