package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/internal/acmecert"
)

// acmeRun is --domain at work: the certificate manager, the plain HTTP
// listener for HTTP-01 and redirects, and the first certificate request.
type acmeRun struct {
	m      *acmecert.Manager
	domain string
	log    *slog.Logger
	http   *http.Server // nil with --acme-http-listen ""
	stop   context.CancelFunc
	wg     sync.WaitGroup
}

// startACME prepares the manager (cache in DATADIR/acme) and starts the
// HTTP listener; tlsPort is where https is served, for redirects.
func startACME(ctx context.Context, o *options, tlsPort int, log *slog.Logger) (*acmeRun, error) {
	var roots []byte
	if o.acmeCAFile != "" {
		b, err := os.ReadFile(o.acmeCAFile)
		if err != nil {
			return nil, fmt.Errorf("--acme-ca-file: %w", err)
		}
		roots = b
	}
	m, err := acmecert.New(acmecert.Options{Domain: o.domain, Email: o.acmeEmail, Directory: o.acmeDirectory, CARoots: roots,
		CacheDir: filepath.Join(o.dataDir, "acme"), TLSPort: tlsPort, Log: log})
	if err != nil {
		return nil, fmt.Errorf("--domain: %w", err)
	}
	r := &acmeRun{m: m, domain: o.domain, log: log, stop: func() {}}
	if o.acmeHTTPListen == "" {
		log.Info("no --acme-http-listen: no HTTP-01 and no http->https redirect; certificates through TLS-ALPN-01 on the main port")
		return r, nil
	}
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", o.acmeHTTPListen)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w (choose another with --acme-http-listen, or \"\" to disable HTTP-01)", o.acmeHTTPListen, err)
	}
	r.http = &http.Server{Handler: m.HTTPHandler(), ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second, IdleTimeout: time.Minute}
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		if err := r.http.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Error("ACME HTTP listener", "addr", ln.Addr().String(), "err", err)
		}
	}()
	log.Info("ACME HTTP-01 and redirect to https listening", "addr", ln.Addr().String())
	return r, nil
}

// obtain requests the certificate in the background once the listeners
// answer challenges, so that the first client does not wait for it and a
// failure shows in the log at start rather than at a client's handshake.
func (r *acmeRun) obtain(ctx context.Context) {
	ctx, r.stop = context.WithCancel(ctx)
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		exp, err := r.m.Obtain(ctx)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			r.log.Error("no TLS certificate yet (retried at the next TLS handshake): check that the --domain name resolves to this host and that ports 443 and 80 (or --listen and --acme-http-listen) are reachable from the internet",
				"domain", r.domain, "err", err)
		default:
			r.log.Info("TLS certificate ready", "domain", r.domain, "not_after", exp.UTC().Format(time.RFC3339))
		}
	}()
}

// Close stops the HTTP listener and waits for the goroutines.
func (r *acmeRun) Close() {
	r.stop()
	if r.http != nil {
		_ = r.http.Close()
	}
	r.wg.Wait()
}
