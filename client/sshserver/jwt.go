package sshserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/crypto/blake2b"
)

// NetBird's JWT check: when management sends a jwtConfig with the peer's
// SSH settings, a client may log in with a password that is a token of the
// account's identity provider (how NetBird's own `netbird ssh` logs in:
// it sees the marker below in the server's version and asks its daemon
// for a token). The server checks the token's signature against the
// provider's keys, its issuer, audience, expiry and age, and that the
// user it names is one the map's sshAuth lets in as the requested local
// user. The source must still be a map peer a policy lets reach tcp/22.

// jwtMarker in the server's version string tells NetBird's clients that
// they must log in with a token (their detection reads the version line).
const (
	netbirdServerID = "NetBird-SSH-Server"
	jwtMarker       = "NetBird-JWT-Required"
)

// DefaultMaxTokenAge is how old (since its iat) a token may be when
// jwtConfig.maxTokenAge is 0, as NetBird's servers default.
const DefaultMaxTokenAge = 10 * time.Minute

// Wildcard in MachineUsers lets the listed users in as any local user.
const Wildcard = "*"

// Sentinel errors of the JWT check (wrapped with the details).
var (
	ErrTokenRefused  = errors.New("token refused")
	ErrUserNotListed = errors.New("user not authorized for SSH on this peer")
)

// JWTConfig is the map's jwtConfig: whose tokens are accepted.
type JWTConfig struct {
	Issuer       string
	Audiences    []string
	KeysLocation string        // the provider's JWKS URL
	MaxTokenAge  time.Duration // 0: DefaultMaxTokenAge
}

// UserHash is a user ID hashed as management sends it in
// sshAuth.AuthorizedUsers: BLAKE2b with a 16-byte digest.
type UserHash [16]byte

// HashUserID hashes a user ID the way sshAuth lists it.
func HashUserID(id string) UserHash {
	h, _ := blake2b.New(16, nil) // only fails for a bad size or key
	h.Write([]byte(id))
	var out UserHash
	copy(out[:], h.Sum(nil))
	return out
}

// Users is the map's sshAuth: who may log in with a token, and as which
// local users.
type Users struct {
	// Claim is the token claim holding the user ID ("": sub).
	Claim string
	// Hashes are the authorized users' IDs, hashed.
	Hashes []UserHash
	// Machine maps a local user name (or Wildcard) to indexes into
	// Hashes: the users who may log in as it.
	Machine map[string][]uint32
}

// allows reports whether the user with ID id may log in as local.
func (u *Users) allows(id, local string) error {
	if u == nil {
		return fmt.Errorf("%w: the network map lists no SSH users for this peer", ErrUserNotListed)
	}
	h := HashUserID(id)
	idx := slices.Index(u.Hashes, h)
	if idx < 0 {
		return fmt.Errorf("%w: user %q is not among the account's SSH users", ErrUserNotListed, id)
	}
	if slices.Contains(u.Machine[Wildcard], uint32(idx)) || slices.Contains(u.Machine[local], uint32(idx)) {
		return nil
	}
	return fmt.Errorf("%w: user %q may not log in as local user %q", ErrUserNotListed, id, local)
}

// JWTVerifier checks tokens of one provider. It keeps the provider's keys
// (fetched at first use and again for an unknown key ID), so the engine
// keeps one for as long as jwtConfig is unchanged.
type JWTVerifier struct {
	cfg JWTConfig
	v   *oidc.IDTokenVerifier
	now func() time.Time
}

// signingAlgs are the algorithms accepted (go-oidc's default is RS256
// only; providers sign with ES256 or EdDSA too).
var signingAlgs = []string{oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512, oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA}

// NewJWTVerifier returns a verifier for cfg. keys nil means the keys at
// cfg.KeysLocation, fetched with hc (nil: a client with a 10-second
// timeout) at first use and again only for an unknown key ID, at most
// once per KeyRefetchInterval of now; now nil means time.Now.
func NewJWTVerifier(cfg JWTConfig, keys oidc.KeySet, hc *http.Client, now func() time.Time) (*JWTVerifier, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("jwtConfig: no issuer")
	}
	if len(cfg.Audiences) == 0 {
		return nil, errors.New("jwtConfig: no audience")
	}
	if cfg.MaxTokenAge <= 0 {
		cfg.MaxTokenAge = DefaultMaxTokenAge
	}
	if now == nil {
		now = time.Now
	}
	if keys == nil {
		if cfg.KeysLocation == "" {
			return nil, errors.New("jwtConfig: no keysLocation (the provider's JWKS URL)")
		}
		// Not oidc.NewRemoteKeySet: it fetches again for every signature
		// that fails, so each forged token would make this peer download
		// the provider's keys.
		keys = newRemoteKeys(cfg.KeysLocation, hc, now)
	}
	v := oidc.NewVerifier(cfg.Issuer, keys, &oidc.Config{SkipClientIDCheck: true, SupportedSigningAlgs: signingAlgs, Now: now})
	return &JWTVerifier{cfg: cfg, v: v, now: now}, nil
}

// Config is what the verifier was made for.
func (j *JWTVerifier) Config() JWTConfig { return j.cfg }

// Verify checks token (signature, issuer, expiry, one of the audiences,
// its age) and returns the user ID its claim names.
func (j *JWTVerifier) Verify(ctx context.Context, token, claim string) (string, error) {
	t, err := j.v.Verify(ctx, token)
	if err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenRefused, err)
	}
	if !slices.ContainsFunc(t.Audience, func(a string) bool { return slices.Contains(j.cfg.Audiences, a) }) {
		return "", fmt.Errorf("%w: audience %q is none of %q", ErrTokenRefused, t.Audience, j.cfg.Audiences)
	}
	if t.IssuedAt.IsZero() {
		return "", fmt.Errorf("%w: no iat claim", ErrTokenRefused)
	}
	if age := j.now().Sub(t.IssuedAt); age > j.cfg.MaxTokenAge {
		return "", fmt.Errorf("%w: issued %v ago, more than the %v allowed (log in again)", ErrTokenRefused, age.Round(time.Second), j.cfg.MaxTokenAge)
	}
	if claim == "" {
		claim = "sub"
	}
	var claims map[string]any
	if err := t.Claims(&claims); err != nil {
		return "", fmt.Errorf("%w: %w", ErrTokenRefused, err)
	}
	id, _ := claims[claim].(string)
	if id == "" {
		return "", fmt.Errorf("%w: no user ID in claim %q", ErrTokenRefused, claim)
	}
	return id, nil
}

// JWTAuth is the token login a map allows: the verifier and the users.
type JWTAuth struct {
	Verifier *JWTVerifier
	Users    *Users
}

// login checks token for a login as local and returns the user's ID.
func (ja *JWTAuth) login(ctx context.Context, token, local string) (string, error) {
	var claim string
	if ja.Users != nil {
		claim = ja.Users.Claim
	}
	id, err := ja.Verifier.Verify(ctx, token, claim)
	if err != nil {
		return "", err
	}
	if err := ja.Users.allows(id, local); err != nil {
		return "", err
	}
	return id, nil
}

// authorizeToken decides a token login from address from as the local
// user: from is a map peer's address, a policy lets it reach tcp/22, and
// the token passes the map's JWT check. It returns the peer and the
// token's user ID.
func (a *Access) authorizeToken(ctx context.Context, token string, from netip.Addr, local string) (Peer, string, error) {
	if a == nil {
		return Peer{}, "", fmt.Errorf("no network map yet")
	}
	if a.JWT == nil {
		return Peer{}, "", errors.New("this peer takes no token logins: management sent no jwtConfig (the account has no identity provider)")
	}
	p, err := a.peerAt(from)
	if err != nil {
		return Peer{}, "", err
	}
	id, err := a.JWT.login(ctx, token, local)
	if err != nil {
		return Peer{}, "", err
	}
	return p, id, nil
}

// authorizeUser decides again, with a newer map, whether the user who
// logged in with a token from address from as local may go on.
func (a *Access) authorizeUser(id string, from netip.Addr, local string) error {
	if a == nil || a.JWT == nil {
		return errors.New("the network map no longer allows token logins")
	}
	if _, err := a.peerAt(from); err != nil {
		return err
	}
	return a.JWT.Users.allows(id, local)
}

// peerAt is the map peer at overlay address from, if a policy lets it
// reach this peer on tcp/22.
func (a *Access) peerAt(from netip.Addr) (Peer, error) {
	from = from.Unmap()
	i := slices.IndexFunc(a.Peers, func(p Peer) bool { return p.IP == from })
	if i < 0 {
		return Peer{}, fmt.Errorf("%s is no mesh peer's address", from)
	}
	p := a.Peers[i]
	if !a.allows(from) {
		return Peer{}, a.noPolicy(p)
	}
	return p, nil
}
