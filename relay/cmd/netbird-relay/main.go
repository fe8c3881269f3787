// Command netbird-relay runs the relay alone, as NetBird's relay binary
// does: WebSocket on --listen-address (and QUIC on the same UDP port when
// it has a TLS certificate), tokens checked with the secret management
// signs them with. Several relays with distinct exposed addresses can serve
// one management (netbird-mgmt --relay URL, repeated).
package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/internal/flagconf"
	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/logging"
	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/secretflag"
	"github.com/wiremesh/wiremesh/internal/version"
	relay "github.com/wiremesh/wiremesh/relay/server"
)

func main() {
	if err := command().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type options struct {
	listen, exposed, secret, certFile, keyFile, logLevel string
	metricsAddr                                          string
	allowUnbound                                         bool
	secretFile                                           *secretflag.Secret
}

func command() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "netbird-relay",
		Short:         "NetBird-compatible relay (rel:// over WebSocket, rels:// with TLS and QUIC)",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.secretFile.Resolve(); err != nil {
				return err
			}
			return run(cmd.Context(), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.listen, "listen-address", "l", ":33080", "address to listen on (TCP for WebSocket, UDP for QUIC)")
	f.StringVarP(&o.exposed, "exposed-address", "e", "", "address clients reach this relay at, e.g. rels://relay.example.com:443 (required; sent to clients verbatim)")
	f.StringVarP(&o.secret, "auth-secret", "s", os.Getenv("NB_AUTH_SECRET"), "token secret shared with management (env NB_AUTH_SECRET)")
	o.secretFile = secretflag.File(f, "auth-secret", "NB_AUTH_SECRET", &o.secret)
	f.StringVar(&o.metricsAddr, "metrics-addr", os.Getenv("NB_METRICS_ADDR"), metrics.FlagUsage)
	f.StringVar(&o.certFile, "tls-cert-file", "", "TLS certificate (enables rels:// and QUIC)")
	f.StringVar(&o.keyFile, "tls-key-file", "", "TLS private key")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.BoolVar(&o.allowUnbound, "allow-unbound-tokens", false, "accept tokens not bound to a peer (NetBird's management issues these); any holder of one can then take over any peer's relay connection")
	flagconf.Install(cmd, os.LookupEnv)
	return cmd
}

// instanceURL completes the exposed address as the reference does: without
// a scheme it gets rels:// with TLS and rel:// without.
func instanceURL(exposed string, tlsOn bool) (string, error) {
	if exposed == "" {
		return "", errors.New("--exposed-address is required (the rel:// or rels:// address clients dial)")
	}
	if !strings.Contains(exposed, "://") {
		if tlsOn {
			exposed = "rels://" + exposed
		} else {
			exposed = "rel://" + exposed
		}
	}
	u, err := url.ParseRequestURI(exposed)
	if err != nil {
		return "", fmt.Errorf("--exposed-address %q: %w", exposed, err)
	}
	switch {
	case u.Scheme == "rel" && tlsOn:
		return "", errors.New("--exposed-address rel:// with TLS: use rels://")
	case u.Scheme == "rels" && !tlsOn:
		return "", errors.New("--exposed-address rels:// needs --tls-cert-file and --tls-key-file")
	case u.Scheme != "rel" && u.Scheme != "rels":
		return "", fmt.Errorf("--exposed-address %q: scheme must be rel or rels", exposed)
	}
	return u.String(), nil
}

func run(ctx context.Context, o options) error {
	log, err := logging.New(os.Stderr, o.logLevel)
	if err != nil {
		return err
	}
	if o.secret == "" {
		return errors.New("--auth-secret (or NB_AUTH_SECRET) is required: the secret management signs relay tokens with")
	}
	var tlsConf *tls.Config
	if o.certFile != "" || o.keyFile != "" {
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	instance, err := instanceURL(o.exposed, tlsConf != nil)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	srv, err := relay.New(relay.Options{InstanceURL: instance, Secret: o.secret, Log: log, AllowUnboundTokens: o.allowUnbound})
	if err != nil {
		return err
	}
	defer srv.Close()
	raw, err := net.Listen("tcp", o.listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (choose another with --listen-address)", o.listen, err)
	}
	// The same connection caps as the other servers' public ports: a flood
	// of idle or half-open connections is closed at accept, and counted.
	ln := grpcserver.Limit(raw, grpcserver.ConnLimits{})
	mux := http.NewServeMux()
	mux.Handle(relayconn.Path, srv)
	// Not on the public port: on --metrics-addr, if set.
	me, err := metrics.Listen(o.metricsAddr, metrics.Handler(srv.Metrics, ln.Metrics), log)
	if err != nil {
		return err
	}
	defer me.Close()
	if me != nil {
		fmt.Fprintf(os.Stderr, "netbird-relay: Prometheus metrics at http://%s/metrics\n", me.Addr())
	}
	mux.HandleFunc("/health", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"ok","timestamp":%q}`+"\n", time.Now().UTC().Format(time.RFC3339))
	})
	// WebSocket sessions are long-lived and not cut; a connection between
	// requests (keep-alive) is closed after two idle minutes.
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: 2 * time.Minute}
	errc := make(chan error, 2)
	if tlsConf != nil {
		go func() { errc <- hs.Serve(tls.NewListener(ln, tlsConf)) }()
		pc, err := net.ListenPacket("udp", o.listen)
		if err != nil {
			return fmt.Errorf("QUIC on udp %s: %w", o.listen, err)
		}
		ql, err := relayconn.ListenQUIC(pc, tlsConf)
		if err != nil {
			return err
		}
		defer ql.Close()
		go func() { errc <- srv.ServeQUIC(ql) }()
	} else {
		log.Info("no TLS certificate: not starting the QUIC listener (clients use WebSocket)")
		go func() { errc <- hs.Serve(ln) }()
	}
	fmt.Fprintf(os.Stderr, "netbird-relay %s: listening on %s, exposed as %s\n", version.Version, ln.Addr(), instance)
	select {
	case <-ctx.Done():
	case err := <-errc:
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
	}
	srv.Close() // close messages to every peer first
	sctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	return hs.Shutdown(sctx)
}
