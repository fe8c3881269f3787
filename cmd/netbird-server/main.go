// Command netbird-server is the all-in-one server: management, signal and an
// embedded STUN/TURN server, with management and signal gRPC on one TCP port
// and no configuration file.
package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"net/netip"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/wiremesh/wiremesh/internal/acmecert"
	"github.com/wiremesh/wiremesh/internal/agentinstall"
	"github.com/wiremesh/wiremesh/internal/clientip"
	"github.com/wiremesh/wiremesh/internal/flagconf"
	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/healthcheck"
	"github.com/wiremesh/wiremesh/internal/logging"
	"github.com/wiremesh/wiremesh/internal/memlimit"
	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/internal/netaddr"
	"github.com/wiremesh/wiremesh/internal/plainlisten"
	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/secretflag"
	"github.com/wiremesh/wiremesh/internal/turnserver"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/management/admin"
	"github.com/wiremesh/wiremesh/management/grpcapi"
	"github.com/wiremesh/wiremesh/management/httpapi"
	"github.com/wiremesh/wiremesh/management/idflag"
	"github.com/wiremesh/wiremesh/management/mailflag"
	"github.com/wiremesh/wiremesh/management/releasecheck"
	mgmt "github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/storeflag"
	"github.com/wiremesh/wiremesh/management/turncreds"
	"github.com/wiremesh/wiremesh/management/users"
	relay "github.com/wiremesh/wiremesh/relay/server"
	sig "github.com/wiremesh/wiremesh/signal/server"
)

func main() {
	if err := command().ExecuteContext(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

type options struct {
	store                                 *storeflag.Flags
	dataDir, listen, publicAddr, logLevel string
	stunPort                              int
	turnSecret, turnRelayIP               string
	stunListen                            string
	turnDenied, turnAllowed               []string
	relaySecret                           string
	noRelay, pprof                        bool
	metricsAddr                           string
	secrets                               []*secretflag.Secret
	certFile, keyFile                     string
	domain, acmeEmail, acmeDirectory      string
	acmeCAFile, acmeHTTPListen            string
	publicURL, insecureListen             string
	changed                               func(flag string) bool
	identity                              *idflag.Flags
	releases                              *releasecheck.Flags
	mail                                  *mailflag.Flags
	ownerEmail                            string
	trustedProxies                        []string
	dashboardOrigins                      []string
	agents                                *agentinstall.Flags
	memLimit                              *memlimit.Flag
}

func command() *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "netbird-server",
		Short:         "All-in-one mesh VPN server: management, signal and STUN/TURN",
		Version:       version.String(),
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE:          func(cmd *cobra.Command, _ []string) error { return run(cmd.Context(), &o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.dataDir, "datadir", "/var/lib/netbird-server", "directory holding the store")
	f.StringVar(&o.listen, "listen", "", "TCP address of management, signal, REST, dashboard and relay (default "+defaultPlainListen+" without TLS, "+defaultACMEListen+" with --domain, "+defaultTLSListen+" with --tls-cert-file)")
	f.StringVar(&o.insecureListen, "insecure-listen", "", "serve plaintext HTTP/gRPC on this non-loopback address (clients' keys and tokens travel unencrypted; instead of --listen)")
	f.StringVar(&o.domain, "domain", "", "get and renew a TLS certificate for this DNS name by ACME (Let's Encrypt) and serve everything on --listen (default :443) with it; answers HTTP-01 and redirects http to https on --acme-http-listen")
	f.StringVar(&o.acmeEmail, "acme-email", "", "contact e-mail of the ACME account (optional; the CA warns there before a certificate expires)")
	f.StringVar(&o.acmeDirectory, "acme-directory", acmecert.LetsEncrypt, "ACME directory URL (e.g. Let's Encrypt staging, or a private CA)")
	f.StringVar(&o.acmeCAFile, "acme-ca-file", "", "PEM root certificate(s) to trust for the ACME directory's own https (a private CA); default the system roots")
	f.StringVar(&o.acmeHTTPListen, "acme-http-listen", ":80", "with --domain: plain HTTP address answering HTTP-01 challenges and redirecting everything else to https (\"\" disables both; TLS-ALPN-01 on the main port still works)")
	f.StringVar(&o.publicURL, "public-url", "", "https://HOST[:PORT] clients reach this server at through a TLS reverse proxy (Caddy, Traefik, nginx): advertise https and rels:// there while listening in plaintext behind it")
	o.changed = f.Changed
	f.StringVar(&o.publicAddr, "public-address", "", "host name or IP clients reach this server at (default: the host each client dialed)")
	f.IntVar(&o.stunPort, "stun-port", 3478, "UDP port of the embedded STUN/TURN server (0 disables it)")
	f.StringVar(&o.turnSecret, "turn-secret", "", "TURN REST shared secret (default: random at each start)")
	f.StringVar(&o.stunListen, "stun-listen", "", "UDP address of the embedded STUN/TURN server (default: the host of --listen, port --stun-port; every interface when --listen is loopback and --public-url/--public-address name a public host)")
	f.StringArrayVar(&o.turnDenied, "turn-denied-peer-ip", nil, "CIDR or IP TURN clients may not relay to, on top of loopback, link-local, multicast, the overlay 100.64.0.0/10 and this host's addresses (repeatable)")
	f.StringArrayVar(&o.turnAllowed, "turn-allowed-peer-ip", nil, "CIDR or IP TURN clients may relay to even when denied (repeatable)")
	f.StringVar(&o.turnRelayIP, "turn-relay-ip", "", "IPv4 address of relayed TURN allocations (default: public address or first global IPv4)")
	f.StringVar(&o.relaySecret, "relay-secret", "", "secret of relay tokens, shared with separate relays (default: random at each start)")
	f.StringVar(&o.certFile, "tls-cert-file", "", "TLS certificate: serve https (management, signal, rels:// relay) on --listen and relay QUIC on the same UDP port")
	f.StringVar(&o.keyFile, "tls-key-file", "", "TLS private key")
	f.BoolVar(&o.noRelay, "disable-relay", false, "do not run the embedded relay (rel:// WebSocket on the --listen port)")
	o.secrets = []*secretflag.Secret{
		secretflag.File(f, "turn-secret", "NB_TURN_SECRET", &o.turnSecret),
		secretflag.File(f, "relay-secret", "NB_RELAY_AUTH_SECRET", &o.relaySecret),
	}
	f.StringVar(&o.metricsAddr, "metrics-addr", os.Getenv("NB_METRICS_ADDR"), metrics.FlagUsage)
	f.BoolVar(&o.pprof, "debug-pprof", false, "serve Go profiles at /debug/pprof/ on the --listen port (for diagnosing load; keep it off where the port is public)")
	f.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
	f.StringSliceVar(&o.dashboardOrigins, "dashboard-origin", nil, "browser origin of a dashboard served elsewhere, scheme://host[:port], allowed to call the REST API cross-origin (CORS; repeatable or comma-separated; none by default)")
	f.StringSliceVar(&o.trustedProxies, "trusted-proxies", nil, "reverse proxies (addresses or prefixes, comma-separated) whose X-Forwarded-For names the client for login and setup-key limits; ignored from anyone else")
	o.store = storeflag.Bind(f)
	o.memLimit = memlimit.Bind(f)
	o.agents = agentinstall.Bind(f)
	o.identity = idflag.Bind(f, true)
	o.releases = releasecheck.Bind(f)
	o.mail = mailflag.Bind(f)
	f.StringVar(&o.ownerEmail, "owner-email", "admin@netbird.selfhosted", "with the built-in identity provider: create this owner with a one-time initial password at first start (empty: create the owner through POST /api/setup)")
	cmd.AddCommand(admin.Command("/var/lib/netbird-server"), admin.MigrateCommand("/var/lib/netbird-server"),
		healthcheck.Command("http://127.0.0.1:33073/healthz"))
	flagconf.Install(cmd, os.LookupEnv, flagconf.EmptyEnv("acme-http-listen")) // NB_ACME_HTTP_LISTEN= turns HTTP-01 off
	return cmd
}

func run(ctx context.Context, o *options) error {
	if err := secretflag.ResolveAll(o.secrets...); err != nil {
		return err
	}
	sc, err := o.store.Config(o.dataDir, os.Getenv)
	if err != nil {
		return err
	}
	// A data directory of another user: say so, not SQLite's "unable to open database file".
	if err := admin.CheckDataDir(sc); err != nil {
		return err
	}
	log, err := logging.New(os.Stderr, o.logLevel)
	if err != nil {
		return err
	}
	trusted, err := clientip.ParsePrefixes(o.trustedProxies)
	if err != nil {
		return fmt.Errorf("--trusted-proxies: %w", err)
	}
	if limit, err := o.memLimit.Apply(); err != nil {
		return err
	} else if limit > 0 {
		log.Info("memory limit", "bytes", limit)
	}
	origins, err := httpapi.ParseOrigins(o.dashboardOrigins)
	if err != nil {
		return fmt.Errorf("--dashboard-origin: %w", err)
	}
	releases, err := o.releases.Checker(log)
	if err != nil {
		return fmt.Errorf("--version-check-url: %w", err)
	}
	mail, err := o.mail.Mail(log)
	if err != nil {
		return err
	}
	lp, err := plan(listenFlags{listen: o.listen, insecureListen: o.insecureListen, certFile: o.certFile, keyFile: o.keyFile, domain: o.domain,
		acmeEmail: o.acmeEmail, acmeCAFile: o.acmeCAFile, acmeDirChanged: o.changed("acme-directory"), acmeHTTPListen: o.acmeHTTPListen,
		acmeHTTPChanged: o.changed("acme-http-listen"), publicURL: o.publicURL, publicAddr: o.publicAddr})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	var tlsConf *tls.Config
	if o.certFile != "" {
		cert, err := tls.LoadX509KeyPair(o.certFile, o.keyFile)
		if err != nil {
			return fmt.Errorf("TLS certificate: %w", err)
		}
		// h2 for gRPC (clients insist on it), http/1.1 for the relay's WebSocket.
		tlsConf = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12, NextProtos: []string{"h2", "http/1.1"}}
	}
	ln, err := net.Listen("tcp", lp.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w (choose another with --listen)", lp.Listen, err)
	}
	if lp.Insecure {
		log.Warn("serving plaintext on a non-loopback address (--insecure-listen): setup keys, tokens and passwords cross the network unencrypted", "listen", lp.Listen)
	}
	conns := grpcserver.Limit(ln, grpcserver.ConnLimits{})
	ln = conns
	port := ln.Addr().(*net.TCPAddr).Port
	var certs *acmeRun
	if lp.ACME {
		if certs, err = startACME(ctx, o, port, log); err != nil {
			ln.Close()
			return err
		}
		defer certs.Close()
		tlsConf = certs.m.TLSConfig()
	}
	if tlsConf != nil {
		ln = tls.NewListener(ln, preferHTTP1(tlsConf))
	}
	publicPort := lp.PublicPort
	if publicPort == 0 {
		publicPort = port
	}

	adv := mgmt.Advertiser{PublicHost: lp.PublicHost, SignalPort: publicPort, SignalTLS: lp.PublicTLS, RelayTLS: lp.PublicTLS}
	issuer := turncreds.Issuer{Secret: o.turnSecret}
	var turnMetrics func() []metrics.Sample
	if o.stunPort != 0 {
		if issuer.Secret == "" {
			if issuer.Secret, err = randomSecret(); err != nil {
				return err
			}
		}
		relayIP, err := netaddr.RelayIP(ctx, firstNonEmpty(o.turnRelayIP, lp.PublicHost))
		if err != nil {
			return fmt.Errorf("TURN relay address: %w (set --turn-relay-ip)", err)
		}
		denied, err := prefixes("--turn-denied-peer-ip", o.turnDenied)
		if err != nil {
			return err
		}
		allowed, err := prefixes("--turn-allowed-peer-ip", o.turnAllowed)
		if err != nil {
			return err
		}
		ts, err := turnserver.Start(turnserver.Options{Listen: stunListen(o.stunListen, lp.Listen, lp.PublicHost, o.stunPort), RelayIP: relayIP, Secret: issuer.Secret, Log: log,
			DeniedPeers: denied, AllowedPeers: allowed})
		if err != nil {
			return fmt.Errorf("%w (choose another with --stun-port, or 0 to disable)", err)
		}
		defer ts.Close()
		turnMetrics = ts.Metrics
		adv.STUNPort, adv.TURNPort = ts.Port(), ts.Port()
		log.Info("STUN/TURN listening", "udp_port", ts.Port(), "relay_ip", relayIP)
	}

	// The host clients reach us at, for URLs that must name one address
	// (the relay instance, the identity provider's issuer).
	host := lp.PublicHost
	if host == "" {
		if ip, err := netaddr.RelayIP(ctx, ""); err == nil {
			host = ip.String()
		}
	}
	idHost := lp.PublicHost
	if idHost == "" {
		idHost = host
		if ip := ln.Addr().(*net.TCPAddr).IP; !ip.IsUnspecified() {
			idHost = ip.String() // listening on one address: that is where clients come
		}
	}
	identity, err := o.identity.Identity(idHost, publicPort, lp.PublicTLS)
	if err != nil {
		return err
	}

	mux := http.NewServeMux()
	var rl *relay.Server
	relayAuth := grpcapi.RelayAuth{Secret: o.relaySecret}
	if !o.noRelay {
		if relayAuth.Secret == "" {
			if relayAuth.Secret, err = randomSecret(); err != nil {
				return err
			}
		}
		// The instance URL is compared verbatim by clients and dialed when
		// it is another peer's home relay: it must be one reachable address.
		if host == "" {
			return errors.New("relay address: no global IPv4 address found (set --public-address)")
		}
		scheme := "rel://"
		if lp.PublicTLS {
			scheme = "rels://"
		}
		instance := scheme + net.JoinHostPort(host, strconv.Itoa(publicPort))
		if rl, err = relay.New(relay.Options{InstanceURL: instance, Secret: relayAuth.Secret, Log: log}); err != nil {
			return err
		}
		defer rl.Close()
		if tlsConf != nil {
			pc, err := net.ListenPacket("udp", net.JoinHostPort(ln.Addr().(*net.TCPAddr).IP.String(), strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("relay QUIC on UDP %d: %w", port, err)
			}
			ql, err := relayconn.ListenQUIC(pc, tlsConf)
			if err != nil {
				pc.Close()
				return err
			}
			defer pc.Close()
			defer ql.Close()
			go func() {
				if err := rl.ServeQUIC(ql); err != nil {
					log.Warn("relay QUIC listener", "err", err)
				}
			}()
		}
		mux.Handle(relayconn.Path, rl)
		adv.RelayPort = publicPort
		log.Info("relay listening", "instance", instance)
	}

	m, err := mgmt.Open(ctx, mgmt.Options{Store: sc, Log: log, Advertise: adv, TURN: issuer, Relay: relayAuth, Identity: identity, TrustedProxies: trusted, DashboardOrigins: origins,
		Releases: releases, Mail: mail})
	if err != nil {
		return err
	}
	defer m.Close()
	m.Mount(mux)
	// GET /install.sh and the agents it installs, from --agent-dir.
	agents, err := agentinstall.New(agentinstall.Options{Dir: o.agents.Dir, PublicHost: lp.PublicHost, PublicPort: publicPort, TLS: lp.PublicTLS,
		AllowPlaintext: o.agents.AllowPlaintext, Log: log})
	if err != nil {
		return err
	}
	agents.Mount(mux)
	if m.IdP != nil {
		if err := firstOwner(ctx, m, o.ownerEmail, o.dataDir); err != nil {
			return err
		}
		// The initial password file goes once the owner has used it.
		wctx, stopWatch := context.WithCancel(ctx)
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			watchInitialPassword(wctx, o.dataDir, storeOwnerLogin(m.Store), time.Minute, log)
		}()
		defer func() { stopWatch(); <-watched }()
		fmt.Fprintf(os.Stderr, "Identity provider:   %s (users log in with `netbird up` without a setup key)\n", m.IdP.Issuer())
	}
	s := sig.New(sig.Options{Log: log})
	g := grpcserver.New()
	m.Register(g)
	s.Register(g)

	fmt.Fprintf(os.Stderr, "netbird-server %s: management and signal on %s (gRPC), STUN/TURN on UDP %d, data in %s\n", version.Version, ln.Addr(), adv.STUNPort, o.dataDir)
	fmt.Fprintf(os.Stderr, "Create a setup key:  netbird-server admin --datadir %s setup-keys create --reusable\n", o.dataDir)
	fmt.Fprintf(os.Stderr, "Join a peer:         netbird up --management-url %s --setup-key KEY\n", publicBase(lp.PublicHost, publicPort, lp.PublicTLS))

	// End long-lived streams first so that the graceful stop is quick.
	stopStreams := context.AfterFunc(ctx, func() {
		m.EndStreams()
		s.Close()
		if rl != nil {
			rl.Close()
		}
	})
	defer stopStreams()
	sources := []func() []metrics.Sample{m.API.Metrics, m.Users.Metrics, s.Metrics, conns.Metrics, memlimit.Metrics}
	if rl != nil {
		sources = append(sources, rl.Metrics)
	}
	if turnMetrics != nil {
		sources = append(sources, turnMetrics)
	}
	if m.IdP != nil {
		sources = append(sources, m.IdP.Metrics)
	}
	// Not on the public port: on --metrics-addr, if set.
	me, err := metrics.Listen(o.metricsAddr, metrics.Handler(sources...), log)
	if err != nil {
		return err
	}
	defer me.Close()
	if me != nil {
		fmt.Fprintf(os.Stderr, "Prometheus metrics:  http://%s/metrics\n", me.Addr())
	}
	if o.pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	}
	mux.Handle("/healthz", metrics.Health(m.Healthy))
	if certs != nil {
		certs.obtain(ctx)
	}
	return grpcserver.Serve(ctx, ln, g, mux, log, 5*time.Second)
}

// firstOwner creates the owner with a one-time initial password when the
// install has none, prints it once and keeps it in DATADIR/initial-password
// until the owner has used it.
func firstOwner(ctx context.Context, m *mgmt.Server, email, dataDir string) error {
	need, err := m.Users.SetupRequired(ctx)
	if err != nil || !need {
		return err
	}
	if email == "" {
		fmt.Fprintf(os.Stderr, "No owner yet: create one with POST /api/setup {\"email\":...,\"password\":...,\"name\":...}\n")
		return nil
	}
	pw, err := randomSecret()
	if err != nil {
		return err
	}
	pw = pw[:20] + "A!7" // the password policy wants an upper-case letter, a symbol and a digit
	u, _, err := m.Users.Setup(ctx, users.SetupInput{Email: email, Password: pw, Name: "Owner"})
	if errors.Is(err, users.ErrSetupDone) {
		return nil // another instance was first
	}
	if err != nil {
		return fmt.Errorf("create the owner: %w", err)
	}
	fmt.Fprintf(os.Stderr, "Owner created:       %s, initial password %s (shown once; change it with PUT /api/users/%s/password)\n", u.Email, pw, u.ID)
	// The owner exists now: a file that cannot be written leaves the line
	// above as the only copy, which is worth a warning, not a failed start.
	p, err := writeInitialPassword(dataDir, u.ID, u.Email, pw)
	if err != nil {
		fmt.Fprintf(os.Stderr, "Warning: %v: the line above is the only copy of the initial password\n", err)
		return nil
	}
	fmt.Fprintf(os.Stderr, "Initial password in: %s (readable by this user only; removed once the owner logs in or changes it)\n", p)
	return nil
}

// preferHTTP1 gives HTTP/1.1 to TLS clients that offer it beside h2
// (browsers, curl) and h2 to those offering only h2 (gRPC clients): on one
// port, an h2 connection is gRPC's, so a browser speaking h2 would reach
// the gRPC server instead of the dashboard, REST API and login pages.
func preferHTTP1(base *tls.Config) *tls.Config {
	http1 := base.Clone()
	http1.NextProtos = []string{"http/1.1"}
	c := base.Clone()
	c.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if acmecert.IsChallenge(hello) {
			return nil, nil // TLS-ALPN-01: acme-tls/1 is in base's NextProtos only
		}
		if slices.Contains(hello.SupportedProtos, "http/1.1") {
			return http1, nil
		}
		return nil, nil
	}
	return c
}

func randomSecret() (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// stunListen is where STUN/TURN listens: the explicit address, or the host
// of the gRPC listen address (a server on loopback stays on loopback) with
// the STUN port. A loopback --listen with a public host elsewhere
// (--public-url, --public-address) is a server behind a TCP reverse proxy,
// which does not carry STUN/TURN's UDP: clients are told to reach the
// public host's STUN port directly, so it listens on every interface.
func stunListen(explicit, listen, publicHost string, port int) string {
	if explicit != "" {
		return explicit
	}
	host, _, err := net.SplitHostPort(listen)
	if err != nil {
		host = ""
	}
	if plainlisten.Loopback(host) && publicHost != "" && !plainlisten.Loopback(publicHost) {
		host = ""
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

// prefixes parses CIDRs or bare IPs given to flag.
func prefixes(flag string, vals []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range vals {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			a, aerr := netip.ParseAddr(v)
			if aerr != nil {
				return nil, fmt.Errorf("%s %q: not a CIDR or IP address: %w", flag, v, err)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}
