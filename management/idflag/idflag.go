// Package idflag binds the command-line flags that configure user login
// (the built-in identity provider or an external OpenID Connect one, and
// how users are placed in accounts) and resolves them into a
// server.Identity. It is shared by netbird-server and netbird-mgmt.
package idflag

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/users"
)

// Flags holds the parsed values.
type Flags struct {
	builtIn                                  bool
	idpIssuer, accountMode                   string
	issuer, clientID, scopes, groupsClaim    string
	audiences, dashboardRedirects, redirects []string
	accountDomains                           []string
	useIDToken                               bool
}

// Bind registers the flags; builtInDefault is whether the built-in
// provider is on unless told otherwise.
func Bind(fs *pflag.FlagSet, builtInDefault bool) *Flags {
	f := &Flags{}
	fs.BoolVar(&f.builtIn, "builtin-idp", builtInDefault, "serve the built-in identity provider (local users) under /oauth2 on the main port")
	fs.StringVar(&f.idpIssuer, "idp-issuer", "", "public URL of the built-in identity provider (default: http(s)://PUBLIC-ADDRESS:PORT/oauth2)")
	fs.StringVar(&f.accountMode, "account-mode", "single", "where new users go: single (one account for everyone) or domain (an account per e-mail domain)")
	fs.StringSliceVar(&f.accountDomains, "account-domains", envList("NB_ACCOUNT_DOMAINS"), "with --account-mode domain: e-mail domains whose users (verified addresses only) share one account per domain; everyone else gets a private account (comma-separated or repeatable; env NB_ACCOUNT_DOMAINS)")
	fs.StringSliceVar(&f.dashboardRedirects, "dashboard-redirect", nil, "login callback URL of the dashboard for the built-in provider (repeatable)")
	fs.StringVar(&f.issuer, "oidc-issuer", "", "issuer URL of an external OpenID Connect provider (Keycloak, Authentik, Zitadel, Entra, Okta, Google...); turns the built-in one off")
	fs.StringVar(&f.clientID, "oidc-client-id", "", "client ID the agents log in with at the external provider")
	fs.StringSliceVar(&f.audiences, "oidc-audience", nil, "accepted token audience (repeatable; default: the client ID)")
	fs.StringVar(&f.scopes, "oidc-scopes", "openid profile email", "scopes agents request")
	fs.StringVar(&f.groupsClaim, "oidc-groups-claim", "groups", "token claim holding the user's groups (JWT group sync)")
	fs.BoolVar(&f.useIDToken, "oidc-use-id-token", false, "agents present the ID token instead of the access token (providers whose access tokens are not JWTs)")
	fs.StringSliceVar(&f.redirects, "oidc-redirect", nil, "agent PKCE callback URL (repeatable; default: http://localhost:53000/ and :54000/)")
	return f
}

// Identity resolves the flags. publicHost and port describe where the
// server is reached, for the built-in provider's default issuer; tls says
// whether it serves https.
func (f *Flags) Identity(publicHost string, port int, tls bool) (server.Identity, error) {
	mode, err := users.ParseMode(f.accountMode)
	if err != nil {
		return server.Identity{}, fmt.Errorf("--account-mode: %w", err)
	}
	domains, err := users.ParseDomains(f.accountDomains)
	if err != nil {
		return server.Identity{}, fmt.Errorf("--account-domains: %w", err)
	}
	if len(domains) > 0 && mode != users.DomainAccounts {
		return server.Identity{}, errors.New("--account-domains needs --account-mode domain")
	}
	id := server.Identity{Mode: mode, AccountDomains: domains, DashboardRedirects: f.dashboardRedirects}
	if f.issuer != "" {
		if _, err := url.ParseRequestURI(f.issuer); err != nil {
			return id, fmt.Errorf("--oidc-issuer: %w", err)
		}
		if f.clientID == "" {
			return id, errors.New("--oidc-issuer needs --oidc-client-id (the client the agents log in with)")
		}
		id.Issuer, id.ClientID, id.Audiences, id.Scopes = f.issuer, f.clientID, f.audiences, f.scopes
		id.GroupsClaim, id.UseIDToken, id.RedirectURLs = f.groupsClaim, f.useIDToken, f.redirects
		return id, nil
	}
	if !f.builtIn {
		return id, nil
	}
	id.BuiltInIssuer = f.idpIssuer
	if id.BuiltInIssuer == "" {
		if publicHost == "" {
			return id, errors.New("the built-in identity provider needs the server's public address: set --public-address or --idp-issuer (or --builtin-idp=false)")
		}
		scheme := "http"
		if tls {
			scheme = "https"
		}
		id.BuiltInIssuer = scheme + "://" + net.JoinHostPort(publicHost, strconv.Itoa(port)) + "/oauth2"
	}
	if u, err := url.Parse(id.BuiltInIssuer); err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return id, fmt.Errorf("--idp-issuer %q is not an absolute http(s) URL", id.BuiltInIssuer)
	}
	return id, nil
}

// envList reads a comma-separated list from the environment (a flag's
// default).
func envList(name string) []string {
	var out []string
	for _, v := range strings.Split(os.Getenv(name), ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
