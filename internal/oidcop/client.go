package oidcop

import (
	"strings"
	"time"

	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
)

// ClientConfig registers an application with the provider. Every client is
// public: the agent proves itself with PKCE or the device code, the
// dashboard with PKCE.
type ClientConfig struct {
	ID string
	// RedirectURIs the client may return to. For a native client a
	// loopback URI matches on any port (RFC 8252 §7.3).
	RedirectURIs []string
	// Native marks an installed application (the agent), which may also
	// use the device flow; otherwise it is a browser application.
	Native bool
	// PostLogoutRedirectURIs are where end-session may send the browser
	// back to (exact match; for a native client a loopback URI matches on
	// any port).
	PostLogoutRedirectURIs []string
}

// Client implements op.Client.
type Client struct {
	cfg      ClientConfig
	refresh  bool // the provider issues refresh tokens
	loginURL func(string) string
}

func (c *Client) GetID() string                    { return c.cfg.ID }
func (c *Client) RedirectURIs() []string           { return c.cfg.RedirectURIs }
func (c *Client) PostLogoutRedirectURIs() []string { return c.cfg.PostLogoutRedirectURIs }
func (c *Client) ApplicationType() op.ApplicationType {
	if c.cfg.Native {
		return op.ApplicationTypeNative
	}
	return op.ApplicationTypeUserAgent
}
func (c *Client) AuthMethod() oidc.AuthMethod { return oidc.AuthMethodNone }
func (c *Client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *Client) GrantTypes() []oidc.GrantType {
	g := []oidc.GrantType{oidc.GrantTypeCode}
	if c.cfg.Native {
		g = append(g, oidc.GrantTypeDeviceCode)
	}
	if c.refresh {
		g = append(g, oidc.GrantTypeRefreshToken)
	}
	return g
}
func (c *Client) LoginURL(id string) string           { return c.loginURL(id) }
func (c *Client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeJWT }
func (c *Client) IDTokenLifetime() time.Duration      { return time.Hour }

// DevMode allows plain-http redirects for a browser client, which a
// dashboard served without TLS on a private network needs.
func (c *Client) DevMode() bool {
	if c.cfg.Native {
		return false
	}
	for _, u := range c.cfg.RedirectURIs {
		if strings.HasPrefix(u, "http://") {
			return true
		}
	}
	return false
}
func (c *Client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *Client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *Client) IsScopeAllowed(scope string) bool     { return scope == GroupsClaim }
func (c *Client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *Client) ClockSkew() time.Duration             { return 0 }
