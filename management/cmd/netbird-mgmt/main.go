// Command netbird-mgmt runs the management service alone (signal and
// STUN/TURN elsewhere), and administers its store.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/internal/agentinstall"
	"github.com/wiremesh/wiremesh/internal/clientip"
	"github.com/wiremesh/wiremesh/internal/flagconf"
	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/healthcheck"
	"github.com/wiremesh/wiremesh/internal/logging"
	"github.com/wiremesh/wiremesh/internal/memlimit"
	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/internal/plainlisten"
	"github.com/wiremesh/wiremesh/internal/secretflag"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/management/admin"
	"github.com/wiremesh/wiremesh/management/grpcapi"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/idflag"
	"github.com/wiremesh/wiremesh/management/mailflag"
	"github.com/wiremesh/wiremesh/management/releasecheck"
	mgmt "github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storeflag"
	"github.com/wiremesh/wiremesh/management/turncreds"
)

func main() {
	if err := command().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

const defaultDir = "/var/lib/netbird-mgmt"

func command() *cobra.Command {
	var (
		dataDir, listen, publicAddr, signalAddr, logLevel, turnSecret, turnUser, turnPass string
		insecureListen                                                                    string
		metricsAddr                                                                       string
		stuns, turns, relays                                                              []string
		relaySecret                                                                       string
		relayTTL                                                                          time.Duration
		signalTLS                                                                         bool
		turnTTL                                                                           time.Duration
	)
	cmd := &cobra.Command{
		Use:           "netbird-mgmt",
		Short:         "Mesh VPN management server",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "datadir", defaultDir, "directory holding the store")
	f.StringVar(&listen, "listen", "", "TCP address for management gRPC, REST and dashboard, plaintext: a loopback address behind a TLS reverse proxy (default 127.0.0.1:33073)")
	f.StringVar(&insecureListen, "insecure-listen", "", "serve plaintext on this non-loopback address (setup keys and tokens travel unencrypted; instead of --listen)")
	f.StringVar(&publicAddr, "public-address", "", "host clients reach STUN/TURN and signal at when those URIs name no host (default: the host each client dialed)")
	f.StringVar(&signalAddr, "signal", "", "signal server host:port to hand to clients (required)")
	f.BoolVar(&signalTLS, "signal-tls", false, "the signal server uses TLS")
	f.StringSliceVar(&stuns, "stun", nil, "STUN URI to hand out, e.g. stun:stun.example.com:3478 (repeatable)")
	f.StringSliceVar(&turns, "turn", nil, "TURN URI to hand out, e.g. turn:turn.example.com:3478?transport=udp (repeatable)")
	f.StringVar(&turnSecret, "turn-secret", "", "TURN REST shared secret (coturn static-auth-secret) for time-limited credentials")
	f.DurationVar(&turnTTL, "turn-ttl", turncreds.DefaultTTL, "lifetime of issued TURN credentials")
	f.StringVar(&turnUser, "turn-user", "", "static TURN user (when no --turn-secret)")
	f.StringVar(&turnPass, "turn-password", "", "static TURN password (when no --turn-secret)")
	f.StringSliceVar(&relays, "relay", nil, "relay URL to hand out, e.g. rels://relay.example.com:443 (repeatable; netbird-relay instances)")
	f.StringVar(&relaySecret, "relay-secret", os.Getenv("NB_RELAY_AUTH_SECRET"), "relay token secret, the relays' --auth-secret (env NB_RELAY_AUTH_SECRET)")
	f.DurationVar(&relayTTL, "relay-ttl", 12*time.Hour, "lifetime of issued relay tokens")
	f.StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&metricsAddr, "metrics-addr", os.Getenv("NB_METRICS_ADDR"), metrics.FlagUsage)
	var trustedProxies, dashboardOrigins []string
	f.StringSliceVar(&dashboardOrigins, "dashboard-origin", nil, "browser origin of a dashboard served elsewhere, scheme://host[:port], allowed to call the REST API cross-origin (CORS; repeatable or comma-separated; none by default)")
	f.StringSliceVar(&trustedProxies, "trusted-proxies", nil, "reverse proxies (addresses or prefixes, comma-separated) whose X-Forwarded-For names the client for login and setup-key limits; ignored from anyone else")
	storeFlags := storeflag.Bind(f)
	memLimit := memlimit.Bind(f)
	agentFlags := agentinstall.Bind(f)
	idFlags := idflag.Bind(f, false)
	releaseFlags := releasecheck.Bind(f)
	mailFlags := mailflag.Bind(f)
	secrets := []*secretflag.Secret{
		secretflag.File(f, "turn-secret", "NB_TURN_SECRET", &turnSecret),
		secretflag.File(f, "turn-password", "NB_TURN_PASSWORD", &turnPass),
		secretflag.File(f, "relay-secret", "NB_RELAY_AUTH_SECRET", &relaySecret),
	}
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if err := secretflag.ResolveAll(secrets...); err != nil {
			return err
		}
		if signalAddr == "" {
			return fmt.Errorf("--signal HOST:PORT is required (where clients reach netbird-signal)")
		}
		sh, sp, err := net.SplitHostPort(signalAddr)
		if err != nil {
			return fmt.Errorf("--signal %q: want host:port: %w", signalAddr, err)
		}
		port, err := strconv.Atoi(sp)
		if err != nil {
			return fmt.Errorf("--signal %q: bad port", signalAddr)
		}
		sc, err := storeFlags.Config(dataDir, os.Getenv)
		if err != nil {
			return err
		}
		// A data directory of another user: say so, not SQLite's "unable to open database file".
		if err := admin.CheckDataDir(sc); err != nil {
			return err
		}
		if len(relays) > 0 && relaySecret == "" {
			return fmt.Errorf("--relay needs --relay-secret (the relays' --auth-secret)")
		}
		log, err := logging.New(os.Stderr, logLevel)
		if err != nil {
			return err
		}
		if limit, err := memLimit.Apply(); err != nil {
			return err
		} else if limit > 0 {
			log.Info("memory limit", "bytes", limit)
		}
		trusted, err := clientip.ParsePrefixes(trustedProxies)
		if err != nil {
			return fmt.Errorf("--trusted-proxies: %w", err)
		}
		origins, err := httpapi.ParseOrigins(dashboardOrigins)
		if err != nil {
			return fmt.Errorf("--dashboard-origin: %w", err)
		}
		releases, err := releaseFlags.Checker(log)
		if err != nil {
			return fmt.Errorf("--version-check-url: %w", err)
		}
		mail, err := mailFlags.Mail(log)
		if err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		addr, public, err := plainlisten.Addr(listen, insecureListen, "127.0.0.1:33073", "")
		if err != nil {
			return err
		}
		raw, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("listen on %s: %w (choose another with --listen)", addr, err)
		}
		if public {
			log.Warn("serving plaintext on a non-loopback address (--insecure-listen): setup keys, tokens and passwords cross the network unencrypted", "listen", addr)
		}
		ln := grpcserver.Limit(raw, grpcserver.ConnLimits{})
		idHost := publicAddr
		if ip := ln.Addr().(*net.TCPAddr).IP; idHost == "" && !ip.IsUnspecified() {
			idHost = ip.String()
		}
		identity, err := idFlags.Identity(idHost, ln.Addr().(*net.TCPAddr).Port, false)
		if err != nil {
			ln.Close()
			return err
		}
		adv := mgmt.Advertiser{PublicHost: publicAddr, SignalHost: sh, SignalPort: port, SignalTLS: signalTLS, ExtraSTUNs: stuns, ExtraTURNs: turns, Relays: relays}
		m, err := mgmt.Open(ctx, mgmt.Options{Store: sc, Log: log, Advertise: adv,
			TURN:  turncreds.Issuer{Secret: turnSecret, TTL: turnTTL, StaticUser: turnUser, StaticPass: turnPass},
			Relay: grpcapi.RelayAuth{Secret: relaySecret, TTL: relayTTL}, Identity: identity, TrustedProxies: trusted, DashboardOrigins: origins,
			Releases: releases, Mail: mail})
		if err != nil {
			ln.Close()
			return err
		}
		defer m.Close()
		g := grpcserver.New()
		m.Register(g)
		fmt.Fprintf(os.Stderr, "netbird-mgmt %s: management gRPC on %s, signal advertised as %s, %s store\n", version.Version, ln.Addr(), signalAddr, describe(sc))
		fmt.Fprintf(os.Stderr, "Create a setup key: netbird-mgmt admin --datadir %s setup-keys create --reusable\n", dataDir)
		stopStreams := context.AfterFunc(ctx, m.EndStreams)
		defer stopStreams()
		mux := http.NewServeMux()
		m.Mount(mux)
		// GET /install.sh and the agents it installs, from --agent-dir.
		agents, err := agentinstall.New(agentinstall.Options{Dir: agentFlags.Dir, AllowPlaintext: agentFlags.AllowPlaintext, Log: log})
		if err != nil {
			return err
		}
		agents.Mount(mux)
		sources := []func() []metrics.Sample{m.API.Metrics, m.Users.Metrics, ln.Metrics, memlimit.Metrics}
		if m.IdP != nil {
			sources = append(sources, m.IdP.Metrics)
		}
		// Not on the public port: on --metrics-addr, if set.
		me, err := metrics.Listen(metricsAddr, metrics.Handler(sources...), log)
		if err != nil {
			return err
		}
		defer me.Close()
		if me != nil {
			fmt.Fprintf(os.Stderr, "Prometheus metrics: http://%s/metrics\n", me.Addr())
		}
		mux.Handle("/healthz", metrics.Health(m.Healthy))
		return grpcserver.Serve(ctx, ln, g, mux, log, 5*time.Second)
	}
	cmd.AddCommand(admin.Command(defaultDir), admin.MigrateCommand(defaultDir), healthcheck.Command("http://127.0.0.1:33073/healthz"))
	flagconf.Install(cmd, os.LookupEnv)
	return cmd
}

func describe(c store.Config) string {
	if c.Engine == store.Postgres {
		return "postgres"
	}
	return "sqlite in " + c.DataDir
}
