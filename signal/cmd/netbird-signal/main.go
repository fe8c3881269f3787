// Command netbird-signal runs the signal service alone.
package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/internal/flagconf"
	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/logging"
	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/internal/plainlisten"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/signal/natsbus"
	sig "github.com/wiremesh/wiremesh/signal/server"
)

func main() {
	var listen, insecureListen, logLevel, natsURL, metricsAddr string
	cmd := &cobra.Command{
		Use:           "netbird-signal",
		Short:         "Mesh VPN signal server: relays sealed ICE offers, answers and candidates",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := logging.New(os.Stderr, logLevel)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			addr, public, err := plainlisten.Addr(listen, insecureListen, "127.0.0.1:10000", "")
			if err != nil {
				return err
			}
			raw, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("listen on %s: %w (choose another with --listen)", addr, err)
			}
			if public {
				log.Warn("serving plaintext on a non-loopback address (--insecure-listen)", "listen", addr)
			}
			ln := grpcserver.Limit(raw, grpcserver.ConnLimits{})
			o := sig.Options{Log: log}
			if natsURL != "" {
				bus, err := natsbus.Dial(natsURL, "netbird-signal "+ln.Addr().String(), log)
				if err != nil {
					ln.Close()
					return err
				}
				defer bus.Close()
				o.Bus = bus
				fmt.Fprintf(os.Stderr, "netbird-signal: joined other instances through NATS at %s\n", natsURL)
			}
			s := sig.New(o)
			g := grpcserver.New()
			s.Register(g)
			fmt.Fprintf(os.Stderr, "netbird-signal %s: signal gRPC on %s\n", version.Version, ln.Addr())
			stopStreams := context.AfterFunc(ctx, s.Close)
			defer stopStreams()
			mux := http.NewServeMux()
			// Not on the public port: on --metrics-addr, if set.
			me, err := metrics.Listen(metricsAddr, metrics.Handler(s.Metrics, ln.Metrics), log)
			if err != nil {
				return err
			}
			defer me.Close()
			if me != nil {
				fmt.Fprintf(os.Stderr, "netbird-signal: Prometheus metrics at http://%s/metrics\n", me.Addr())
			}
			mux.Handle("/healthz", metrics.Health(nil))
			return grpcserver.Serve(ctx, ln, g, mux, log, 5*time.Second)
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "TCP address for signal gRPC, plaintext: a loopback address behind a TLS reverse proxy (default 127.0.0.1:10000)")
	cmd.Flags().StringVar(&insecureListen, "insecure-listen", "", "serve plaintext on this non-loopback address (instead of --listen)")
	cmd.Flags().StringVar(&natsURL, "nats", os.Getenv("NB_SIGNAL_NATS_URL"), "NATS server(s), e.g. nats://nats1:4222,nats://nats2:4222: run several signal instances that route messages between their peers (env NB_SIGNAL_NATS_URL)")
	cmd.Flags().StringVar(&metricsAddr, "metrics-addr", os.Getenv("NB_METRICS_ADDR"), metrics.FlagUsage)
	cmd.Flags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	flagconf.EnvAlias(cmd.Flags(), "nats", "NB_SIGNAL_NATS_URL")
	flagconf.Install(cmd, os.LookupEnv)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}
