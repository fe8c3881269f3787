// Package healthcheck is the `healthcheck` subcommand of the servers: it
// asks a running server's /healthz and exits non-zero unless it answers
// 200, so container images need no curl or wget for their HEALTHCHECK. It
// checks liveness only, not the server's identity.
package healthcheck

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/internal/plainlisten"
)

// Command returns `healthcheck [--url URL]`, defaulting to defaultURL.
func Command(defaultURL string) *cobra.Command {
	var target, serverName string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the server at --url answers /healthz with 200 (for container HEALTHCHECKs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return CheckName(ctx, target, serverName)
		},
	}
	cmd.Flags().StringVar(&target, "url", defaultURL, "health URL of the server")
	cmd.Flags().StringVar(&serverName, "server-name", "", "TLS server name (SNI) to ask an https --url for, e.g. the --domain of a server with an ACME certificate (default: the URL's host)")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}

// Check GETs target and returns an error unless the answer is 200. For an
// https URL on a loopback host the certificate is not verified: the
// certificate names the public domain, not 127.0.0.1.
func Check(ctx context.Context, target string) error { return CheckName(ctx, target, "") }

// CheckName is Check sending serverName as the TLS server name (SNI) of an
// https URL: a server that picks its certificate by name (ACME) may refuse
// a handshake naming none, which is what a loopback IP URL sends.
func CheckName(ctx context.Context, target, serverName string) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q: want http(s)://host:port/healthz", target)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if u.Scheme == "https" {
		tr.TLSClientConfig = &tls.Config{ServerName: serverName, MinVersion: tls.VersionTLS12}
		if plainlisten.Loopback(u.Hostname()) {
			tr.TLSClientConfig.InsecureSkipVerify = true //nolint:gosec // liveness probe on loopback
		}
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		return fmt.Errorf("--url %q: %w", target, err)
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return fmt.Errorf("health check %s: %w", target, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("health check %s: HTTP %d: %s", target, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}
