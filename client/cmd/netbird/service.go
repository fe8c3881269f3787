package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/kardianos/service"
	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/client/daemon"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/internal/logging"
	"github.com/wiremesh/wiremesh/internal/version"
)

// serviceConfig describes the daemon to the OS service manager (systemd,
// SysV, OpenRC or upstart on Linux, launchd on macOS, the SCM on Windows):
// it runs `netbird service run` with the daemon address, config, log file
// and level given to install, and restarts it when it dies.
func serviceConfig(g *globals, name string) (*service.Config, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if exe, err = filepath.Abs(exe); err != nil {
		return nil, err
	}
	args := []string{"service", "run", "--daemon-addr", g.daemonAddr, "--log-level", g.logLevel, "--log-file", g.logFile}
	if g.config != "" {
		args = append(args, "--config", g.config)
	}
	if g.metricsAddr != "" {
		args = append(args, "--metrics-addr", g.metricsAddr)
	}
	env := map[string]string{}
	for _, k := range []string{"NB_STATE_DIR", "NB_FIREWALL", "NB_FORCE_RELAY", "NB_WG_KERNEL"} {
		if v := os.Getenv(k); v != "" {
			env[k] = v
		}
	}
	return &service.Config{
		Name:        name,
		DisplayName: "NetBird",
		Description: "Mesh VPN agent (WireGuard), NetBird-compatible",
		Executable:  exe,
		Arguments:   args,
		EnvVars:     env,
		Option: service.KeyValue{
			"Restart":   "always", // systemd
			"RunAtLoad": true,     // launchd: start at boot
			"KeepAlive": true,     // launchd: restart when it exits
			"OnFailure": "restart",
		},
	}, nil
}

// program adapts the daemon to the service manager's start/stop calls.
type program struct {
	g      *globals
	cancel context.CancelFunc
	done   chan error
}

func (p *program) Start(service.Service) error {
	d, err := newDaemon(p.g)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel, p.done = cancel, make(chan error, 1)
	go func() {
		err := d.Serve(ctx, p.g.daemonAddr)
		if err != nil && ctx.Err() == nil {
			// The daemon cannot serve (e.g. its socket is taken): end the
			// process so the service manager restarts it and logs why.
			fmt.Fprintln(os.Stderr, "daemon failed:", err)
			os.Exit(1)
		}
		p.done <- err
	}()
	return nil
}

func newDaemon(g *globals) (*daemon.Server, error) {
	out, err := g.logger()
	if err != nil {
		return nil, err
	}
	log, level, err := logging.NewLeveled(out, g.logLevel)
	if err != nil {
		return nil, err
	}
	return daemon.New(version.Wire(), log, daemon.Options{StateDir: state.Dir(), ConfigPath: g.config, ForceRelay: os.Getenv("NB_FORCE_RELAY") == "true",
		Firewall: os.Getenv("NB_FIREWALL"), KernelWG: os.Getenv("NB_WG_KERNEL") == "true", MetricsAddr: g.metricsAddr,
		LogFile: logFileOf(g), LogLevel: level, SFTPCommand: sftpCommand(log)}), nil
}

func (p *program) Stop(service.Service) error {
	if p.cancel == nil {
		return nil
	}
	p.cancel()
	return <-p.done
}

func serviceCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "service", Short: "Run the daemon, or manage it as an OS service"}
	var name string
	cmd.PersistentFlags().StringVarP(&name, "service", "s", "netbird", "service name")
	cmd.PersistentFlags().StringVar(&g.metricsAddr, "metrics-addr", "", "serve Prometheus /metrics of the agent on this address, e.g. 127.0.0.1:9091 (off by default)")
	svc := func() (service.Service, *program, error) {
		cfg, err := serviceConfig(g, name)
		if err != nil {
			return nil, nil, err
		}
		p := &program{g: g}
		s, err := service.New(p, cfg)
		if err != nil {
			return nil, nil, fmt.Errorf("service manager: %w", err)
		}
		return s, p, nil
	}
	run := &cobra.Command{Use: "run", Short: "Run the daemon in the foreground (what the service manager starts)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if service.Interactive() {
				// By hand (or a test): run until SIGINT/SIGTERM, errors returned.
				ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
				defer stop()
				d, err := newDaemon(g)
				if err != nil {
					return err
				}
				return d.Serve(ctx, g.daemonAddr)
			}
			s, _, err := svc()
			if err != nil {
				return err
			}
			return s.Run()
		}}
	action := func(use, short, done string, fn func(service.Service) error) *cobra.Command {
		return &cobra.Command{Use: use, Short: short, Args: cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				s, _, err := svc()
				if err != nil {
					return err
				}
				if err := fn(s); err != nil {
					return fmt.Errorf("%s %s: %w", use, name, err)
				}
				fmt.Printf("NetBird service %s %s (%s)\n", name, done, service.ChosenSystem().String())
				return nil
			}}
	}
	install := action("install", "Register the daemon with the OS service manager (starts at boot)", "installed", func(s service.Service) error { return s.Install() })
	uninstall := action("uninstall", "Remove the daemon from the OS service manager", "uninstalled", func(s service.Service) error {
		_ = s.Stop()
		return s.Uninstall()
	})
	start := action("start", "Start the installed service", "started", func(s service.Service) error { return s.Start() })
	stop := action("stop", "Stop the installed service", "stopped", func(s service.Service) error { return s.Stop() })
	restart := action("restart", "Restart the installed service", "restarted", func(s service.Service) error { return s.Restart() })
	statusC := &cobra.Command{Use: "status", Short: "Show whether the service is installed and running", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, _, err := svc()
			if err != nil {
				return err
			}
			st, err := s.Status()
			if err != nil && service.ChosenSystem().String() == "unix-systemv" {
				// kardianos/service reads SysV's "Stopped" (exit status 1) and
				// "not installed" alike as a failure: tell them apart by the script.
				if _, serr := os.Stat(filepath.Join("/etc/init.d", name)); serr == nil {
					st, err = service.StatusStopped, nil
				} else {
					err = service.ErrNotInstalled
				}
			}
			switch {
			case errors.Is(err, service.ErrNotInstalled):
				fmt.Printf("NetBird service %s is not installed\n", name)
				return nil
			case err != nil:
				return fmt.Errorf("status of %s: %w", name, err)
			}
			word := map[service.Status]string{service.StatusRunning: "running", service.StatusStopped: "stopped"}[st]
			if word == "" {
				word = "in an unknown state"
			}
			fmt.Printf("NetBird service %s is installed and %s (%s)\n", name, word, service.ChosenSystem().String())
			return nil
		}}
	cmd.AddCommand(run, install, uninstall, start, stop, restart, statusC)
	return cmd
}
