package auth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
)

// Errors callers check with errors.Is.
var (
	ErrExpired     = errors.New("token expired")
	ErrInvalid     = errors.New("invalid token")
	ErrIdPUnusable = errors.New("identity provider unreachable")
)

// Claims are what management reads from a verified token.
type Claims struct {
	Subject string
	Email   string
	// EmailVerified: the provider vouches for Email (email_verified).
	EmailVerified bool
	Name          string
	Groups        []string
	// IssuedAt is the token's iat (zero when absent).
	IssuedAt time.Time
	// TokenID is the token's jti ("" when absent).
	TokenID string
	// lists are the token's claims that hold a string or a list of
	// strings, for GroupsFrom.
	lists map[string][]string
}

// GroupsFrom returns the groups in the named claim, Groups when name is
// empty (the claim the server was configured with).
func (c Claims) GroupsFrom(name string) []string {
	if name == "" {
		return c.Groups
	}
	return c.lists[name]
}

// JWTConfig describes the identity provider whose tokens are accepted.
type JWTConfig struct {
	// Issuer is the provider's issuer URL (the iss claim must equal it).
	Issuer string
	// Audiences: a token is accepted when its aud names one of them.
	Audiences []string
	// GroupsClaim names the claim with the user's groups ("groups").
	GroupsClaim string
	// ClockSkew tolerated on expiry (0: one minute).
	ClockSkew time.Duration
	// KeySet verifies signatures; nil means the provider's JWKS found
	// through discovery (fetched again when an unknown key ID appears, so
	// key rotation needs no restart).
	KeySet oidc.KeySet
	// HTTPClient for discovery and JWKS; nil means http.DefaultClient
	// with a 10-second timeout.
	HTTPClient *http.Client
	Now        func() time.Time
}

// Verifier checks JWTs of one provider.
type Verifier struct {
	cfg JWTConfig

	mu       sync.Mutex
	verifier *oidc.IDTokenVerifier
	provider *oidc.Provider
	retryAt  time.Time // after a failed discovery
	lastErr  error
}

// NewVerifier returns a verifier. With no KeySet the provider is
// discovered at the first verification and again after a failure, so
// management starts even while the IdP is down.
func NewVerifier(cfg JWTConfig) (*Verifier, error) {
	if cfg.Issuer == "" {
		return nil, errors.New("auth: no issuer configured")
	}
	if len(cfg.Audiences) == 0 {
		return nil, errors.New("auth: no audience configured (the client ID tokens are issued to)")
	}
	if cfg.ClockSkew <= 0 {
		cfg.ClockSkew = time.Minute
	}
	if cfg.GroupsClaim == "" {
		cfg.GroupsClaim = "groups"
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &Verifier{cfg: cfg}
	if cfg.KeySet != nil {
		v.verifier = oidc.NewVerifier(cfg.Issuer, cfg.KeySet, v.oidcConfig(nil))
	}
	return v, nil
}

func (v *Verifier) oidcConfig(algs []string) *oidc.Config {
	skew := v.cfg.ClockSkew
	now := v.cfg.Now
	return &oidc.Config{
		// Audiences are checked below against the whole accepted list.
		SkipClientIDCheck:    true,
		SupportedSigningAlgs: algs,
		Now:                  func() time.Time { return now().Add(-skew) },
	}
}

// Issuer is the accepted issuer.
func (v *Verifier) Issuer() string { return v.cfg.Issuer }

// Provider discovers the issuer's endpoints (for the login flows handed to
// agents); the result is cached.
func (v *Verifier) Provider(ctx context.Context) (*oidc.Provider, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.discover(ctx)
}

func (v *Verifier) discover(ctx context.Context) (*oidc.Provider, error) {
	if v.provider != nil {
		return v.provider, nil
	}
	if v.cfg.Now().Before(v.retryAt) {
		return nil, v.lastErr
	}
	p, err := oidc.NewProvider(oidc.ClientContext(ctx, v.cfg.HTTPClient), v.cfg.Issuer)
	if err != nil {
		v.retryAt, v.lastErr = v.cfg.Now().Add(5*time.Second), fmt.Errorf("%w: discovery of %s: %w", ErrIdPUnusable, v.cfg.Issuer, err)
		return nil, v.lastErr
	}
	v.provider = p
	return p, nil
}

func (v *Verifier) ready(ctx context.Context) (*oidc.IDTokenVerifier, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.verifier != nil {
		return v.verifier, nil
	}
	p, err := v.discover(ctx)
	if err != nil {
		return nil, err
	}
	var meta struct {
		Algs []string `json:"id_token_signing_alg_values_supported"`
		JWKS string   `json:"jwks_uri"`
	}
	if err := p.Claims(&meta); err != nil || meta.JWKS == "" {
		return nil, fmt.Errorf("%w: %s publishes no jwks_uri", ErrIdPUnusable, v.cfg.Issuer)
	}
	// The key set lives as long as the verifier, not the request that
	// happened to create it.
	keys := oidc.NewRemoteKeySet(oidc.ClientContext(context.Background(), v.cfg.HTTPClient), meta.JWKS)
	v.verifier = oidc.NewVerifier(v.cfg.Issuer, keys, v.oidcConfig(meta.Algs))
	return v.verifier, nil
}

// Verify checks a raw JWT and returns its claims.
func (v *Verifier) Verify(ctx context.Context, raw string) (Claims, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Claims{}, fmt.Errorf("%w: empty token", ErrInvalid)
	}
	ver, err := v.ready(ctx)
	if err != nil {
		return Claims{}, err
	}
	tok, err := ver.Verify(oidc.ClientContext(ctx, v.cfg.HTTPClient), raw)
	if err != nil {
		var exp *oidc.TokenExpiredError
		if errors.As(err, &exp) {
			return Claims{}, fmt.Errorf("%w at %s", ErrExpired, exp.Expiry.UTC().Format(time.RFC3339))
		}
		return Claims{}, fmt.Errorf("%w: %s", ErrInvalid, strings.TrimPrefix(err.Error(), "oidc: "))
	}
	if !slices.ContainsFunc(tok.Audience, func(a string) bool { return slices.Contains(v.cfg.Audiences, a) }) {
		return Claims{}, fmt.Errorf("%w: audience %q is not one of %q", ErrInvalid, tok.Audience, v.cfg.Audiences)
	}
	var payload json.RawMessage
	if err := tok.Claims(&payload); err != nil {
		return Claims{}, fmt.Errorf("%w: claims: %w", ErrInvalid, err)
	}
	c, err := ParseClaims(payload, v.cfg.GroupsClaim)
	if err != nil {
		return Claims{}, err
	}
	if c.Subject != tok.Subject {
		return Claims{}, fmt.Errorf("%w: subject mismatch", ErrInvalid)
	}
	return c, nil
}

// ParseClaims reads management's claims from a verified token's JSON
// payload; groupsClaim names the claim with the user's groups. A payload
// without a subject, or whose claims have the wrong types, is ErrInvalid.
func ParseClaims(payload []byte, groupsClaim string) (Claims, error) {
	var all map[string]any
	dec := json.NewDecoder(bytes.NewReader(payload))
	dec.UseNumber()
	if err := dec.Decode(&all); err != nil || all == nil {
		return Claims{}, fmt.Errorf("%w: claims are not a JSON object", ErrInvalid)
	}
	c := Claims{Subject: str(all["sub"]), Email: strings.TrimSpace(str(all["email"])), Name: str(all["name"]), TokenID: str(all["jti"])}
	if c.Subject == "" {
		return Claims{}, fmt.Errorf("%w: no subject", ErrInvalid)
	}
	if c.Name == "" {
		c.Name = str(all["preferred_username"])
	}
	// Some providers send the flag as a string.
	switch ev := all["email_verified"].(type) {
	case bool:
		c.EmailVerified = ev
	case string:
		c.EmailVerified = strings.EqualFold(ev, "true")
	}
	if iat, ok := all["iat"].(json.Number); ok {
		f, err := iat.Float64()
		if err != nil || f < 0 || f > maxUnix {
			return Claims{}, fmt.Errorf("%w: iat %q out of range", ErrInvalid, iat)
		}
		c.IssuedAt = time.Unix(int64(f), 0).UTC()
	}
	c.Groups = strList(all[groupsClaim])
	for k, v := range all {
		if l := strList(v); len(l) > 0 {
			if c.lists == nil {
				c.lists = map[string][]string{}
			}
			c.lists[k] = l
		}
	}
	return c, nil
}

// maxUnix bounds a timestamp claim (the year 9999).
const maxUnix = 253402300799

func str(v any) string {
	s, _ := v.(string)
	return s
}

// strList reads a claim that is a list of strings or a single string.
func strList(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		out := make([]string, 0, len(t))
		for _, e := range t {
			if s, ok := e.(string); ok && s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
