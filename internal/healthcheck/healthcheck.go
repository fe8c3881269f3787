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
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// Command returns `healthcheck [--url URL]`, defaulting to defaultURL.
func Command(defaultURL string) *cobra.Command {
	var target string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when the server at --url answers /healthz with 200 (for container HEALTHCHECKs)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			return Check(ctx, target)
		},
	}
	cmd.Flags().StringVar(&target, "url", defaultURL, "health URL of the server")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "give up after this long")
	return cmd
}

// Check GETs target and returns an error unless the answer is 200. For an
// https URL on a loopback host the certificate is not verified: the
// certificate names the public domain, not 127.0.0.1.
func Check(ctx context.Context, target string) error {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--url %q: want http(s)://host:port/healthz", target)
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if u.Scheme == "https" && isLoopback(u.Hostname()) {
		tr.TLSClientConfig = &tls.Config{InsecureSkipVerify: true} //nolint:gosec // liveness probe on loopback
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

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
