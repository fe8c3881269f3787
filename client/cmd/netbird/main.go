// Command netbird is the agent: a CLI that drives its daemon over a unix
// socket, and the daemon itself (`netbird service run`). Names and flags
// follow the official client's, so scripts written for it work here.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/daemon"
	"github.com/wiremesh/wiremesh/client/debugbundle"
	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/internal/logging"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

func main() {
	if err := root().ExecuteContext(context.Background()); err != nil {
		// `netbird ssh` exits with the remote command's code, as ssh does.
		var ee exitError
		if errors.As(err, &ee) {
			os.Exit(ee.code)
		}
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

type globals struct {
	daemonAddr, mgmtURL, adminURL, logLevel, logFile, setupKey, setupKeyFile, psk, hostname, config string
	metricsAddr                                                                                     string
}

func (g *globals) configPath() string {
	if g.config != "" {
		return g.config
	}
	p := state.Profiles{Dir: state.Dir()}
	return p.Path(p.Active())
}

func root() *cobra.Command {
	g := &globals{}
	cmd := &cobra.Command{
		Use:           "netbird",
		Short:         "Mesh VPN agent",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&g.daemonAddr, "daemon-addr", "unix:///var/run/netbird.sock", "daemon service address (unix:///PATH)")
	pf.StringVarP(&g.mgmtURL, "management-url", "m", "", "management server URL, e.g. http://HOST:33073 (remembered after the first up)")
	pf.StringVar(&g.adminURL, "admin-url", "", "dashboard URL, kept in the profile beside the management URL")
	pf.StringVarP(&g.logLevel, "log-level", "l", "info", "debug, info, warn or error")
	pf.StringVar(&g.logFile, "log-file", "console", "log destination: a path or console")
	pf.StringVarP(&g.setupKey, "setup-key", "k", "", "setup key to register this machine")
	pf.StringVar(&g.setupKeyFile, "setup-key-file", "", "file holding the setup key")
	pf.StringVar(&g.psk, "preshared-key", "", "WireGuard pre-shared key (not supported yet; must be empty)")
	pf.StringVarP(&g.hostname, "hostname", "n", "", "peer name (default: the machine's hostname)")
	pf.StringVarP(&g.config, "config", "c", "", "profile config file (default: $NB_STATE_DIR/config.json)")
	cmd.AddCommand(upCmd(g), downCmd(g), statusCmd(g), versionCmd(), serviceCmd(g), loginCmd(g), logoutCmd(g, "logout"), logoutCmd(g, "deregister"), profileCmd(g), debugCmd(g), networksCmd(g), sshCmd(g), sshConfigCmd(g), sftpServerCmd())
	return cmd
}

func (g *globals) logger() (*os.File, error) {
	if g.logFile == "" || g.logFile == "console" {
		return os.Stderr, nil
	}
	return os.OpenFile(g.logFile, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
}

func (g *globals) readSetupKey() (string, error) {
	if g.setupKeyFile == "" {
		return strings.TrimSpace(g.setupKey), nil
	}
	b, err := os.ReadFile(g.setupKeyFile)
	if err != nil {
		return "", fmt.Errorf("read --setup-key-file: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

func (g *globals) daemon(ctx context.Context) (daemonpb.DaemonServiceClient, func(), error) {
	path, ok := strings.CutPrefix(g.daemonAddr, "unix://")
	if !ok {
		return nil, nil, fmt.Errorf("--daemon-addr %q: want unix:///PATH", g.daemonAddr)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, nil, fmt.Errorf("the netbird daemon is not running at %s: start it with `netbird service run` (or `netbird service start`), or use `netbird up -F`", g.daemonAddr)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, nil, err
	}
	return daemonpb.NewDaemonServiceClient(conn), func() { conn.Close() }, nil
}

// plain strips the gRPC wrapping from daemon errors: users get its words.
func plain(err error) error {
	if s, ok := status.FromError(err); ok {
		return errors.New(s.Message())
	}
	return err
}

type upFlags struct {
	foreground, noBrowser, disableDNS, disableFirewall, allowSSH, sshRoot, trustNewKey bool
	disableIPv6                                                                        bool
	sshLocalForward, sshRemoteForward, disableSSHAuth                                  bool
	exitNodeBlockLAN                                                                   bool
	disableClientRoutes, disableServerRoutes, blockLANAccess                           bool
	iface, profile, exitNode                                                           string
	port, mtu                                                                          int
	dnsLabels                                                                          []string
}

func upCmd(g *globals) *cobra.Command {
	var f upFlags
	cmd := &cobra.Command{Use: "up", Short: "Connect this machine to the mesh", Args: cobra.NoArgs}
	fl := cmd.Flags()
	fl.BoolVarP(&f.foreground, "foreground-mode", "F", false, "run in the foreground, without the daemon")
	fl.StringVar(&f.iface, "interface-name", state.DefaultInterface, "WireGuard interface name")
	fl.IntVar(&f.port, "wireguard-port", state.DefaultPort, "WireGuard UDP port (a free one is used if taken)")
	fl.IntVar(&f.mtu, "mtu", state.DefaultMTU, "interface MTU")
	fl.BoolVar(&f.noBrowser, "no-browser", false, "do not open a browser for SSO: print a URL and a code to use on another device")
	fl.BoolVar(&f.disableDNS, "disable-dns", false, "do not manage the system resolver")
	fl.BoolVar(&f.disableIPv6, "disable-ipv6", false, "take no address on the IPv6 overlay, even where management offers one (remembered in the profile)")
	fl.BoolVar(&f.disableFirewall, "disable-firewall", false, "do not install the peer firewall (accepted)")
	fl.BoolVar(&f.allowSSH, "allow-server-ssh", false, "run the SSH server on the overlay address when management enables SSH for this peer (remembered in the profile)")
	fl.BoolVar(&f.sshRoot, "enable-ssh-root", false, "let SSH clients log in as root (remembered in the profile)")
	fl.BoolVar(&f.sshLocalForward, "enable-ssh-local-port-forwarding", false, "let SSH clients forward local ports through this peer, ssh -L (remembered in the profile)")
	fl.BoolVar(&f.sshRemoteForward, "enable-ssh-remote-port-forwarding", false, "let SSH clients listen on this peer's loopback, ssh -R (remembered in the profile)")
	fl.BoolVar(&f.disableSSHAuth, "disable-ssh-auth", false, "take no identity-provider tokens on this peer's SSH server: peers log in with their keys only, NetBird's clients too (remembered in the profile)")
	fl.StringSliceVar(&f.dnsLabels, "extra-dns-labels", nil, "extra DNS labels (accepted)")
	fl.StringVar(&f.profile, "profile", "", "profile to connect (selects it; see netbird profile list)")
	fl.StringVar(&f.exitNode, "exit-node", "", "send internet traffic through this exit node (its ID in netbird networks ls); other exit nodes are deselected")
	fl.BoolVar(&f.exitNodeBlockLAN, "exit-node-block-lan", false, "while an exit node carries internet traffic, send local LAN traffic through it too (default: the LAN stays reachable directly; remembered in the profile)")
	fl.BoolVar(&f.disableClientRoutes, "disable-client-routes", false, "use none of the routes management offers this machine: they are still listed by netbird networks ls (remembered in the profile)")
	fl.BoolVar(&f.disableServerRoutes, "disable-server-routes", false, "route for no one, even where management makes this machine a routing peer or exit node (remembered in the profile)")
	fl.BoolVar(&f.blockLANAccess, "block-lan-access", false, "as a routing peer or exit node, drop routed traffic to this machine's local networks unless a route names them (remembered in the profile)")
	fl.BoolVar(&f.trustNewKey, "trust-new-server-key", false, "accept a management server whose identity changed since the first login (after a deliberate reinstall)")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		if g.psk != "" {
			return errors.New("--preshared-key is not supported yet")
		}
		sk, err := g.readSetupKey()
		if err != nil {
			return err
		}
		if g.mgmtURL != "" {
			if _, err := mgmtclient.ParseURL(g.mgmtURL); err != nil {
				return err
			}
		}
		if changed := cmd.Flags().Changed("exit-node"); changed && strings.TrimSpace(f.exitNode) == "" {
			return errNoExitNodeName
		}
		if f.foreground {
			if f.exitNode != "" {
				return errors.New("--exit-node needs the daemon: run netbird service run (or netbird service start), then netbird up --exit-node ID")
			}
			return upForeground(cmd.Context(), g, f, sk, cmd.Flags().Changed)
		}
		return upDaemon(cmd.Context(), g, f, sk, cmd.Flags().Changed)
	}
	return cmd
}

func upDaemon(ctx context.Context, g *globals, f upFlags, setupKey string, changed func(string) bool) error {
	c, done, err := g.daemon(ctx)
	if err != nil {
		return err
	}
	defer done()
	req := &daemonpb.LoginRequest{SetupKey: setupKey, ManagementUrl: g.mgmtURL, AdminURL: g.adminURL, Hostname: g.hostname, TrustNewServerKey: f.trustNewKey,
		IsUnixDesktopClient: canOpenBrowser(f.noBrowser)}
	if f.profile != "" {
		req.ProfileName = &f.profile
	}
	if changed("interface-name") {
		req.InterfaceName = &f.iface
	}
	if changed("wireguard-port") {
		p := int64(f.port)
		req.WireguardPort = &p
	}
	if changed("mtu") {
		m := int64(f.mtu)
		req.Mtu = &m
	}
	if changed("disable-dns") {
		req.DisableDns = &f.disableDNS
	}
	if changed("disable-ipv6") {
		req.DisableIpv6 = &f.disableIPv6
	}
	if changed("exit-node-block-lan") {
		req.ExitNodeBlockLan = &f.exitNodeBlockLAN
	}
	if changed("disable-client-routes") {
		req.DisableClientRoutes = &f.disableClientRoutes
	}
	if changed("disable-server-routes") {
		req.DisableServerRoutes = &f.disableServerRoutes
	}
	if changed("block-lan-access") {
		req.BlockLanAccess = &f.blockLANAccess
	}
	if changed("allow-server-ssh") {
		req.ServerSSHAllowed = &f.allowSSH
	}
	if changed("enable-ssh-root") {
		req.EnableSSHRoot = &f.sshRoot
	}
	if changed("enable-ssh-local-port-forwarding") {
		req.EnableSSHLocalPortForwarding = &f.sshLocalForward
	}
	if changed("enable-ssh-remote-port-forwarding") {
		req.EnableSSHRemotePortForwarding = &f.sshRemoteForward
	}
	if changed("disable-ssh-auth") {
		req.DisableSSHAuth = &f.disableSSHAuth
	}
	if err := loginDaemon(ctx, c, req, f.noBrowser); err != nil {
		return err
	}
	if _, err := c.Up(ctx, &daemonpb.UpRequest{ProfileName: optString(f.profile)}); err != nil {
		return plain(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		st, err := c.Status(ctx, &daemonpb.StatusRequest{})
		if err == nil && st.GetStatus() == daemon.StatusConnected {
			fmt.Println("Connected")
			if f.exitNode == "" {
				return nil
			}
			if err := useExitNode(ctx, c, strings.TrimSpace(f.exitNode), exitNodeWait); err != nil {
				return err
			}
			fmt.Printf("Exit node %s selected: internet traffic goes through it\n", strings.TrimSpace(f.exitNode))
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return errors.New("started, but not yet connected to management; see `netbird status`")
}

func upForeground(ctx context.Context, g *globals, f upFlags, setupKey string, changed func(string) bool) error {
	out, err := g.logger()
	if err != nil {
		return err
	}
	log, level, err := logging.NewLeveled(out, g.logLevel)
	if err != nil {
		return err
	}
	cfg, err := state.Load(g.configPath())
	if err != nil {
		return err
	}
	if g.mgmtURL != "" {
		t, _ := mgmtclient.ParseURL(g.mgmtURL)
		cfg.ManagementURL = t.URL
	}
	if g.hostname != "" {
		cfg.Hostname = g.hostname
	}
	if changed("interface-name") || cfg.InterfaceName == "" {
		cfg.InterfaceName = f.iface
	}
	if changed("wireguard-port") {
		cfg.WireguardPort = f.port
	}
	if changed("mtu") {
		cfg.MTU = f.mtu
	}
	if changed("disable-dns") {
		cfg.DisableDNS = f.disableDNS
	}
	if changed("disable-ipv6") {
		cfg.DisableIPv6 = f.disableIPv6
	}
	if changed("exit-node-block-lan") {
		cfg.ExitNodeBlockLAN = f.exitNodeBlockLAN
	}
	if changed("disable-client-routes") {
		cfg.DisableClientRoutes = f.disableClientRoutes
	}
	if changed("disable-server-routes") {
		cfg.DisableServerRoutes = f.disableServerRoutes
	}
	if changed("block-lan-access") {
		cfg.BlockLANAccess = f.blockLANAccess
	}
	if changed("allow-server-ssh") {
		cfg.ServerSSHAllowed = f.allowSSH
	}
	if changed("enable-ssh-root") {
		cfg.EnableSSHRoot = f.sshRoot
	}
	if changed("enable-ssh-local-port-forwarding") {
		cfg.EnableSSHLocalPortForwarding = f.sshLocalForward
	}
	if changed("enable-ssh-remote-port-forwarding") {
		cfg.EnableSSHRemotePortForwarding = f.sshRemoteForward
	}
	if changed("disable-ssh-auth") {
		cfg.DisableSSHAuth = f.disableSSHAuth
	}
	t, err := mgmtclient.ParseURL(cfg.ManagementURL)
	if err != nil {
		return err
	}
	if err := state.Save(g.configPath(), cfg); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if setupKey == "" {
		if err := ssoForeground(ctx, t, cfg, f.noBrowser, log); err != nil {
			return err
		}
	}
	fatal := make(chan error, 1)
	e, err := engine.Start(ctx, engine.Options{Management: t, Private: cfg.Key(), SetupKey: setupKey, Hostname: cfg.Hostname,
		Interface: cfg.InterfaceName, WGPort: cfg.WireguardPort, MTU: cfg.MTU, Version: version.Wire(), Log: log,
		DisableDNS: cfg.DisableDNS, DisableIPv6: cfg.DisableIPv6, ResolvConf: daemon.ResolvConf(state.Dir()), StateDir: state.Dir(), Firewall: os.Getenv("NB_FIREWALL"),
		RouteSelection: engine.RouteSelection(cfg.Routes), ExitNodeLAN: !cfg.ExitNodeBlockLAN,
		DisableClientRoutes: cfg.DisableClientRoutes, DisableServerRoutes: cfg.DisableServerRoutes, BlockLANAccess: cfg.BlockLANAccess,
		AllowServerSSH: cfg.ServerSSHAllowed, AllowSSHRoot: cfg.EnableSSHRoot,
		AllowSSHLocalForwarding: cfg.EnableSSHLocalPortForwarding, AllowSSHRemoteForwarding: cfg.EnableSSHRemotePortForwarding, SSHKey: cfg.RotatedSSHKey(),
		DisableSSHAuth: cfg.DisableSSHAuth, ForceRelay: os.Getenv("NB_FORCE_RELAY") == "true", KernelWG: os.Getenv("NB_WG_KERNEL") == "true", SFTPCommand: sftpCommand(log),
		OnFatal: func(err error) { fatal <- err },
		Bundle: &debugbundle.Source{Version: "netbird " + version.String(), Level: level, LogFile: logFileOf(g), Stacks: true,
			Profile: func() (state.Config, error) { return state.Load(g.configPath()) }}})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "Connected (foreground); press Ctrl-C to disconnect")
	select {
	case <-ctx.Done():
		err = nil
	case err = <-fatal:
	}
	e.Stop()
	return err
}

func downCmd(g *globals) *cobra.Command {
	return &cobra.Command{Use: "down", Short: "Disconnect and remove the interface", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if _, err := c.Down(cmd.Context(), &daemonpb.DownRequest{}); err != nil {
				return plain(err)
			}
			fmt.Println("Disconnected")
			return nil
		}}
}

func loginCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "login", Short: "Register this machine without connecting (with a setup key, or through SSO)", Args: cobra.NoArgs}
	noBrowser := cmd.Flags().Bool("no-browser", false, "do not open a browser for SSO: print a URL and a code to use on another device")
	cmd.RunE = func(cmd *cobra.Command, _ []string) error {
		sk, err := g.readSetupKey()
		if err != nil {
			return err
		}
		c, done, err := g.daemon(cmd.Context())
		if err != nil {
			return err
		}
		defer done()
		req := &daemonpb.LoginRequest{SetupKey: sk, ManagementUrl: g.mgmtURL, Hostname: g.hostname, IsUnixDesktopClient: canOpenBrowser(*noBrowser)}
		if err := loginDaemon(cmd.Context(), c, req, *noBrowser); err != nil {
			return err
		}
		fmt.Println("Logged in")
		return nil
	}
	return cmd
}

func logoutCmd(g *globals, name string) *cobra.Command {
	return &cobra.Command{Use: name, Short: "Remove this machine from the mesh (deletes the peer on the server)", Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, done, err := g.daemon(cmd.Context())
			if err != nil {
				return err
			}
			defer done()
			if _, err := c.Logout(cmd.Context(), &daemonpb.LogoutRequest{}); err != nil {
				return plain(err)
			}
			fmt.Println("Logged out")
			return nil
		}}
}

func versionCmd() *cobra.Command {
	return &cobra.Command{Use: "version", Short: "Print the version", Args: cobra.NoArgs,
		Run: func(*cobra.Command, []string) { fmt.Println(version.String()) }}
}

func optString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
