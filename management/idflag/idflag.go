// Package idflag binds the command-line flags that configure user login
// (the built-in identity provider or an external OpenID Connect one, and
// how users are placed in accounts) and resolves them into a
// server.Identity. It is shared by netbird-server and netbird-mgmt.
package idflag

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/users"
)

// Flags holds the parsed values.
type Flags struct {
	builtIn                                  bool
	idpIssuer, accountMode                   string
	issuer, clientID, scopes, groupsClaim    string
	dashboardClientID                        string
	audiences, dashboardRedirects, redirects []string
	accountDomains                           []string
	useIDToken                               bool
	// upstreamHosts and upstreamCIDRs: exceptions to the address policy
	// of the client for accounts' upstream identity providers.
	upstreamHosts, upstreamCIDRs []string
}

// Bind registers the flags; builtInDefault is whether the built-in
// provider is on unless told otherwise.
func Bind(fs *pflag.FlagSet, builtInDefault bool) *Flags {
	f := &Flags{}
	fs.BoolVar(&f.builtIn, "builtin-idp", builtInDefault, "serve the built-in identity provider (local users) under /oauth2 on the main port")
	fs.StringVar(&f.idpIssuer, "idp-issuer", "", "public URL of the built-in identity provider (default: http(s)://PUBLIC-ADDRESS:PORT/oauth2)")
	fs.StringVar(&f.accountMode, "account-mode", "single", "where new users go: single (one account for everyone) or domain (an account per e-mail domain)")
	fs.StringSliceVar(&f.accountDomains, "account-domains", envList("NB_ACCOUNT_DOMAINS"), "with --account-mode domain: e-mail domains whose users (verified addresses only) share one account per domain; everyone else gets a private account (comma-separated or repeatable; env NB_ACCOUNT_DOMAINS)")
	fs.StringSliceVar(&f.dashboardRedirects, "dashboard-redirect", nil, "extra login callback URL of a dashboard served elsewhere, for the built-in provider (repeatable; the dashboard this server serves, <issuer origin>/nb-auth, is always allowed)")
	fs.StringVar(&f.issuer, "oidc-issuer", "", "issuer URL of an external OpenID Connect provider (Keycloak, Authentik, Zitadel, Entra, Okta, Google...); turns the built-in one off")
	fs.StringVar(&f.clientID, "oidc-client-id", "", "client ID the agents log in with at the external provider")
	fs.StringVar(&f.dashboardClientID, "dashboard-client-id", "", "client ID the dashboard logs in with at the external provider: a public client (code + PKCE) allowing the redirect URI https://HOST/nb-auth (default: --oidc-client-id)")
	fs.StringSliceVar(&f.audiences, "oidc-audience", nil, "accepted token audience (repeatable; default: the client ID)")
	fs.StringVar(&f.scopes, "oidc-scopes", "openid profile email", "scopes agents request")
	fs.StringVar(&f.groupsClaim, "oidc-groups-claim", "groups", "token claim holding the user's groups (JWT group sync)")
	fs.BoolVar(&f.useIDToken, "oidc-use-id-token", false, "agents present the ID token instead of the access token (providers whose access tokens are not JWTs)")
	fs.StringSliceVar(&f.upstreamHosts, "idp-allow-upstream-host", nil, "host name (or address) of an upstream identity provider the built-in one may reach although it resolves to a denied address: loopback, private, link-local, CGNAT or this host's (repeatable)")
	fs.StringSliceVar(&f.upstreamCIDRs, "idp-allowed-upstream-cidr", nil, "address range upstream identity providers may be reached in although it is denied by default, e.g. a Keycloak on the LAN (repeatable)")
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
		id.DashboardClientID = f.dashboardClientID
		return id, nil
	}
	if f.dashboardClientID != "" {
		return id, errors.New("--dashboard-client-id is for an external provider (--oidc-issuer); the built-in one's dashboard client is " + idp.DashboardClientID)
	}
	if !f.builtIn {
		return id, nil
	}
	id.BuiltInIssuer = f.idpIssuer
	id.UpstreamAllow.Hosts = f.upstreamHosts
	for _, v := range f.upstreamCIDRs {
		p, err := netip.ParsePrefix(strings.TrimSpace(v))
		if err != nil {
			a, aerr := netip.ParseAddr(strings.TrimSpace(v))
			if aerr != nil {
				return id, fmt.Errorf("--idp-allowed-upstream-cidr %q: not an address range: %w", v, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		id.UpstreamAllow.CIDRs = append(id.UpstreamAllow.CIDRs, p.Masked())
	}
	if id.BuiltInIssuer == "" {
		if publicHost == "" {
			return id, errors.New("the built-in identity provider needs the server's public address: set --public-address or --idp-issuer (or --builtin-idp=false)")
		}
		scheme, def := "http", 80
		if tls {
			scheme, def = "https", 443
		}
		// Without the scheme's default port: browsers drop it from
		// origins and redirect URIs, and the issuer is compared verbatim.
		hp := net.JoinHostPort(publicHost, strconv.Itoa(port))
		if port == def {
			hp = publicHost
			if strings.Contains(hp, ":") {
				hp = "[" + hp + "]"
			}
		}
		id.BuiltInIssuer = scheme + "://" + hp + "/oauth2"
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
