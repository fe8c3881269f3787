// Package acmecert obtains and renews the server's TLS certificate for one
// domain name from an ACME CA (Let's Encrypt unless told otherwise), with
// the TLS-ALPN-01 challenge answered on the TLS listener itself and HTTP-01
// on a plain HTTP listener that otherwise redirects to https. Certificates
// and the account key are cached in a directory only the server's user can
// read. It does not do DNS-01 (no wildcard certificates) and serves no name
// but the configured one.
package acmecert

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"
)

// LetsEncrypt is the default ACME directory: Let's Encrypt production.
const LetsEncrypt = acme.LetsEncryptURL

// Options configures a Manager.
type Options struct {
	Domain    string // the one name certificates are obtained for
	Email     string // ACME account contact; optional
	Directory string // ACME directory URL; empty: LetsEncrypt
	// CARoots are PEM certificates trusted for the directory's own https
	// (a private CA such as pebble); nil: the system roots.
	CARoots  []byte
	CacheDir string // created 0700; holds the account key and certificates
	// TLSPort is the port https is served on, for redirects (443 is left
	// out of the URL).
	TLSPort int
	Log     *slog.Logger
}

// Manager hands out the certificate for the domain, obtaining it on first
// use and renewing it in the background before it expires (a third of its
// lifetime before, at most 30 days).
type Manager struct {
	m       *autocert.Manager
	domain  string
	tlsPort int
	log     *slog.Logger
	hc      *http.Client // to the CA
}

// New validates the options and prepares the cache directory. Nothing is
// requested from the CA until Obtain or the first TLS handshake.
func New(o Options) (*Manager, error) {
	if err := ValidDomain(o.Domain); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.Directory == "" {
		o.Directory = LetsEncrypt
	}
	if err := validDirectory(o.Directory); err != nil {
		return nil, err
	}
	if o.Email != "" && (!strings.Contains(o.Email, "@") || strings.ContainsAny(o.Email, " ,<>")) {
		return nil, fmt.Errorf("%w: contact e-mail %q", ErrInvalid, o.Email)
	}
	hc := &http.Client{Timeout: 30 * time.Second}
	if o.CARoots != nil {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(o.CARoots) {
			return nil, fmt.Errorf("%w: no PEM certificate in the ACME CA roots", ErrInvalid)
		}
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
		hc.Transport = tr
	}
	if err := os.MkdirAll(o.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("certificate cache: %w", err)
	}
	// An existing directory keeps its mode: the keys in it must stay ours.
	if err := os.Chmod(o.CacheDir, 0o700); err != nil {
		return nil, fmt.Errorf("certificate cache: %w", err)
	}
	am := &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      loggingCache{DirCache: autocert.DirCache(o.CacheDir), domain: o.Domain, log: o.Log},
		HostPolicy: autocert.HostWhitelist(o.Domain),
		Email:      o.Email,
		Client:     &acme.Client{DirectoryURL: o.Directory, HTTPClient: hc, UserAgent: "wiremesh"},
	}
	return &Manager{m: am, domain: o.Domain, tlsPort: o.TLSPort, log: o.Log, hc: hc}, nil
}

// Close drops the idle connections to the CA (their goroutines). A
// renewal already scheduled still runs if the process lives on.
func (m *Manager) Close() { m.hc.CloseIdleConnections() }

// TLSConfig is the listener configuration: certificates for the domain,
// h2 (gRPC), http/1.1 (browsers, the relay's WebSocket) and acme-tls/1
// (the TLS-ALPN-01 challenge, answered by GetCertificate).
func (m *Manager) TLSConfig() *tls.Config {
	return &tls.Config{
		GetCertificate: m.getCertificate,
		MinVersion:     tls.VersionTLS12,
		NextProtos:     []string{"h2", "http/1.1", acme.ALPNProto},
	}
}

// getCertificate answers a hello naming no server (a client dialing an IP
// address, such as the container health check on 127.0.0.1) with the
// domain's certificate instead of autocert's refusal: the name is the
// only one served, so there is nothing to choose between.
func (m *Manager) getCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if hello.ServerName == "" && !IsChallenge(hello) {
		named := *hello
		named.ServerName = m.domain
		hello = &named
	}
	return m.m.GetCertificate(hello)
}

// IsChallenge reports whether a client hello is an ACME TLS-ALPN-01
// validation, which must see the listener's own configuration.
func IsChallenge(hello *tls.ClientHelloInfo) bool {
	return slices.Contains(hello.SupportedProtos, acme.ALPNProto)
}

// Obtain makes sure a certificate is there (from the cache or the CA) and
// returns its expiry. The listeners answering the challenges must be up.
func (m *Manager) Obtain(ctx context.Context) (time.Time, error) {
	type result struct {
		cert *tls.Certificate
		err  error
	}
	ch := make(chan result, 1)
	// autocert takes no context: the request runs under its own deadline
	// (5 minutes) and the result is dropped if ctx ends first; the
	// goroutine then ends with that deadline.
	go func() {
		c, err := m.m.GetCertificate(&tls.ClientHelloInfo{ServerName: m.domain, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256},
			SignatureSchemes: []tls.SignatureScheme{tls.ECDSAWithP256AndSHA256}, SupportedCurves: []tls.CurveID{tls.CurveP256}})
		ch <- result{c, err}
	}()
	select {
	case <-ctx.Done():
		return time.Time{}, ctx.Err()
	case r := <-ch:
		if r.err != nil {
			return time.Time{}, fmt.Errorf("certificate for %s: %w", m.domain, r.err)
		}
		return r.cert.Leaf.NotAfter, nil
	}
}

// HTTPHandler answers HTTP-01 challenges and redirects every other request
// to the same path on https://DOMAIN (308: the method and body are kept).
// The redirect names the configured domain, never the request's Host.
func (m *Manager) HTTPHandler() http.Handler {
	base := "https://" + m.domain
	if m.tlsPort != 0 && m.tlsPort != 443 {
		base = "https://" + net.JoinHostPort(m.domain, strconv.Itoa(m.tlsPort))
	}
	h := m.m.HTTPHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, base+r.URL.RequestURI(), http.StatusPermanentRedirect)
	}))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// autocert matches the Host header against the domain as is: a
		// validation on a non-default port (a CA's test setup, a port
		// mapping) names the port too.
		if host, _, err := net.SplitHostPort(r.Host); err == nil {
			r = r.Clone(r.Context())
			r.Host = host
		}
		h.ServeHTTP(w, r)
	})
}

// loggingCache logs each certificate the manager stores: the first one and
// every renewal (autocert itself reports nothing).
type loggingCache struct {
	autocert.DirCache
	domain string
	log    *slog.Logger
}

func (c loggingCache) Put(ctx context.Context, name string, data []byte) error {
	if err := c.DirCache.Put(ctx, name, data); err != nil {
		c.log.Warn("ACME certificate cache", "file", name, "err", err)
		return err
	}
	if strings.HasPrefix(name, c.domain) {
		c.log.Info("ACME certificate stored", "domain", c.domain, "not_after", notAfter(data))
	}
	return nil
}

// notAfter reads the expiry of the first certificate in a cache entry
// (private key PEM followed by the chain).
func notAfter(data []byte) string {
	for rest := data; len(rest) > 0; {
		var der []byte
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		der = b.Bytes
		if c, err := x509.ParseCertificate(der); err == nil {
			return c.NotAfter.UTC().Format(time.RFC3339)
		}
	}
	return ""
}

// ErrInvalid marks a setting that can never work.
var ErrInvalid = errors.New("invalid ACME setting")

// ValidDomain checks that name is a DNS name a public CA can issue for: not
// an IP address, no port, scheme or wildcard, at least two labels.
func ValidDomain(name string) error {
	bad := func(why string) error { return fmt.Errorf("%w: domain %q %s", ErrInvalid, name, why) }
	switch {
	case name == "":
		return bad("is empty")
	case net.ParseIP(strings.Trim(name, "[]")) != nil:
		return bad("is an IP address; ACME certificates need a DNS name (use --tls-cert-file for an IP)")
	case strings.Contains(name, "://"):
		return bad("must be a bare host name, without scheme")
	case strings.Contains(name, ":"):
		return bad("must be a bare host name, without port")
	case strings.HasPrefix(name, "*"):
		return bad("is a wildcard; only DNS-01 can issue those")
	case strings.HasSuffix(name, "."):
		// TLS clients send the name without the root dot: a certificate
		// policy for "vpn.example.com." would never match one.
		return bad("ends in a dot: give the name without it (vpn.example.com)")
	case len(name) > 253:
		return bad("is longer than 253 characters")
	case !strings.Contains(strings.TrimPrefix(name, "."), "."):
		return bad("needs at least two labels (e.g. vpn.example.com)")
	}
	for _, l := range strings.Split(name, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return bad("has an empty, over-long or hyphen-edged label")
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return bad(fmt.Sprintf("has the character %q", r))
			}
		}
	}
	return nil
}

func validDirectory(s string) error {
	if !strings.HasPrefix(s, "https://") {
		return fmt.Errorf("%w: directory %q must be an https:// URL", ErrInvalid, s)
	}
	return nil
}
