// Package daemon is the agent's local service (`netbird service run`): it
// owns the engine and the profile, and answers the CLI over a unix socket
// with the daemon.DaemonService API. Only one engine runs at a time.
package daemon

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/resolvconf"
	"github.com/wiremesh/wiremesh/client/sshaudit"
	"github.com/wiremesh/wiremesh/client/sso"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// Status words of the daemon API.
const (
	StatusIdle       = "Idle"
	StatusConnecting = "Connecting"
	StatusConnected  = "Connected"
	StatusNeedsLogin = "NeedsLogin"
)

// Server is the daemon.
type Server struct {
	daemonpb.UnimplementedDaemonServiceServer
	profiles    state.Profiles
	fixed       string // --config: one profile at this path, no profile switching
	version     string
	log         *slog.Logger
	forceRelay  bool
	firewall    string
	kernelWG    bool
	metricsAddr string
	logFile     string
	logLevel    *slog.LevelVar
	sftp        []string

	// op serializes what changes the session (login, up, down, switch),
	// so a switch never races another.
	op sync.Mutex

	// startEngine starts a session: engine.Start, or a stand-in in tests
	// (a real engine needs a TUN device and a management server).
	startEngine func(context.Context, engine.Options) (session, error)

	mu         sync.Mutex
	eng        session
	engProfile string
	engConfig  state.Config
	needsLogin bool
	lastErr    string
	// pending is an SSO login waiting for the person (WaitSSOLogin).
	pending *ssoLogin

	// mismatches bounds netbird ssh's host key mismatch reports
	// (sshhostkey.go).
	mismatches *reportLimiter
}

// session is the running engine as the daemon uses it (*engine.Engine).
type session interface {
	Stop()
	Status() engine.Status
	Logout(ctx context.Context) error
	// The route side (client/engine/routes.go), for the network RPCs.
	Networks() []engine.Network
	SelectNetworks(ids []string, appendSel, all bool) error
	DeselectNetworks(ids []string, all bool) error
	RouteSelection() engine.RouteSelection
	// RotateSSHKey reports a new SSH key to management and, once it has
	// it, serves with it (client/engine/ssh.go).
	RotateSSHKey(ctx context.Context, k ed25519.PrivateKey) error
	// RecordSSHHostKeyMismatch queues a host key mismatch netbird ssh
	// saw for the activity log (client/engine/sshaudit.go).
	RecordSSHHostKeyMismatch(m sshaudit.HostKeyMismatch)
}

// startEngine is the real session starter.
func startEngine(ctx context.Context, o engine.Options) (session, error) {
	e, err := engine.Start(ctx, o)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return e, nil
}

// ssoLogin is an SSO login started by Login and finished by WaitSSOLogin.
type ssoLogin struct {
	flow    sso.Flow
	prompt  sso.Prompt
	cfg     state.Config
	profile string
	target  mgmtclient.Target
}

// Options are the daemon's settings beyond the profile.
type Options struct {
	// StateDir holds the profiles (NB_STATE_DIR).
	StateDir string
	// ConfigPath, when set, pins a single profile file (--config).
	ConfigPath string
	// ForceRelay disables ICE (NB_FORCE_RELAY=true).
	ForceRelay bool
	// Firewall picks where firewall rules are enforced (NB_FIREWALL:
	// userspace, the default, or nftables).
	Firewall string
	// KernelWG uses kernel WireGuard where there is one (NB_WG_KERNEL).
	KernelWG bool
	// MetricsAddr, when set, serves Prometheus /metrics there.
	MetricsAddr string
	// LogFile is the daemon's log file ("" when it logs to the console),
	// for debug bundles.
	LogFile string
	// LogLevel is the logger's level, raised to debug while a timed
	// remote debug bundle collects.
	LogLevel *slog.LevelVar
	// SFTPCommand serves SSH's sftp subsystem (engine.Options).
	SFTPCommand []string
}

// New returns a daemon.
func New(version string, log *slog.Logger, o Options) *Server {
	return &Server{profiles: state.Profiles{Dir: o.StateDir}, fixed: o.ConfigPath, version: version, log: log, forceRelay: o.ForceRelay, firewall: o.Firewall, kernelWG: o.KernelWG, metricsAddr: o.MetricsAddr,
		logFile: o.LogFile, logLevel: o.LogLevel, sftp: o.SFTPCommand, startEngine: startEngine,
		mismatches: newReportLimiter(nil)}
}

// active is the selected profile.
func (s *Server) active() string {
	if s.fixed != "" {
		return state.DefaultProfile
	}
	return s.profiles.Active()
}

func (s *Server) path(profile string) string {
	if s.fixed != "" {
		return s.fixed
	}
	return s.profiles.Path(profile)
}

// Serve listens on addr ("unix:///path") until ctx ends. If the active
// profile was up when the daemon last ran, it comes up again.
func (s *Server) Serve(ctx context.Context, addr string) error {
	path, ok := strings.CutPrefix(addr, "unix://")
	if !ok {
		return fmt.Errorf("daemon address %q: only unix:///PATH is supported", addr)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
		c.Close()
		return fmt.Errorf("another daemon is already listening on %s", path)
	}
	_ = os.Remove(path)
	ln, err := net.Listen("unix", path)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", path, err)
	}
	_ = os.Chmod(path, 0o660)
	// The caller's uid, for the settings only root may change.
	g := grpc.NewServer(grpc.Creds(peerCredentials{}))
	daemonpb.RegisterDaemonServiceServer(g, s)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	s.log.Info("daemon listening", "addr", addr)
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); s.resume(rctx) }()
	if s.metricsAddr != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.serveMetrics(rctx, s.metricsAddr); err != nil {
				s.log.Error("metrics", "err", err)
			}
		}()
	}
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	cancel()
	wg.Wait()
	g.Stop()
	s.stop()
	_ = os.Remove(path)
	return err
}

// resume brings the active profile up if it was up, retrying while the
// server is unreachable (a machine booting before its network).
func (s *Server) resume(ctx context.Context) {
	cfg, err := state.Load(s.path(s.active()))
	if err != nil || !cfg.Up || cfg.ManagementURL == "" {
		return
	}
	backoff := time.Second
	for {
		_, err := s.Up(ctx, &daemonpb.UpRequest{})
		if err == nil || status.Code(err) == codes.PermissionDenied || status.Code(err) == codes.FailedPrecondition {
			if err != nil {
				s.log.Warn("could not resume the connection", "err", err)
			}
			return
		}
		s.log.Info("resume: management not reachable yet", "err", err, "retry_in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 30*time.Second)
	}
}

func (s *Server) stop() {
	s.mu.Lock()
	e, p := s.eng, s.pending
	s.eng, s.pending = nil, nil
	s.mu.Unlock()
	if e != nil {
		e.Stop()
	}
	if p != nil {
		p.flow.Close() // frees a PKCE callback port
	}
}

func (s *Server) setNeedsLogin(err error) {
	s.mu.Lock()
	s.needsLogin, s.lastErr = true, err.Error()
	s.mu.Unlock()
}

// Login stores the options and registers the peer with the setup key. It
// checks the server (reachable, same identity as pinned, accepts us)
// before it changes anything, so a bad URL or key leaves the working
// profile and the running session as they were.
func (s *Server) Login(ctx context.Context, req *daemonpb.LoginRequest) (*daemonpb.LoginResponse, error) {
	s.op.Lock()
	defer s.op.Unlock()
	name := s.active()
	if req.ProfileName != nil && req.GetProfileName() != "" && s.fixed == "" {
		if !s.profiles.Exists(req.GetProfileName()) {
			return nil, status.Errorf(codes.NotFound, "no profile %q (create it with: netbird profile add %s)", req.GetProfileName(), req.GetProfileName())
		}
		name = req.GetProfileName()
	}
	cfg, err := state.Load(s.path(name))
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if req.GetManagementUrl() != "" {
		t, err := mgmtclient.ParseURL(req.GetManagementUrl())
		if err != nil {
			return nil, status.Error(codes.InvalidArgument, err.Error())
		}
		cfg.ManagementURL = t.URL
	}
	if req.GetHostname() != "" {
		cfg.Hostname = req.GetHostname()
	}
	if req.GetAdminURL() != "" {
		cfg.AdminURL = req.GetAdminURL()
	}
	if req.InterfaceName != nil {
		cfg.InterfaceName = req.GetInterfaceName()
	}
	if req.WireguardPort != nil {
		cfg.WireguardPort = int(req.GetWireguardPort())
	}
	if req.Mtu != nil {
		cfg.MTU = int(req.GetMtu())
	}
	if req.DisableDns != nil {
		cfg.DisableDNS = req.GetDisableDns()
	}
	if req.DisableIpv6 != nil {
		cfg.DisableIPv6 = req.GetDisableIpv6()
	}
	if req.ExitNodeBlockLan != nil {
		cfg.ExitNodeBlockLAN = req.GetExitNodeBlockLan()
	}
	if req.DisableClientRoutes != nil {
		cfg.DisableClientRoutes = req.GetDisableClientRoutes()
	}
	if req.DisableServerRoutes != nil {
		cfg.DisableServerRoutes = req.GetDisableServerRoutes()
	}
	if req.BlockLanAccess != nil {
		cfg.BlockLANAccess = req.GetBlockLanAccess()
	}
	if req.GetServerSSHAllowed() || req.GetEnableSSHRoot() || req.GetEnableSSHLocalPortForwarding() || req.GetEnableSSHRemotePortForwarding() {
		// They let other peers run commands or reach services here.
		if err := requireRoot(ctx, "enabling the SSH server or its root login/port forwarding"); err != nil {
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
	}
	if req.ServerSSHAllowed != nil {
		cfg.ServerSSHAllowed = req.GetServerSSHAllowed()
	}
	if req.EnableSSHRoot != nil {
		cfg.EnableSSHRoot = req.GetEnableSSHRoot()
	}
	if req.EnableSSHLocalPortForwarding != nil {
		cfg.EnableSSHLocalPortForwarding = req.GetEnableSSHLocalPortForwarding()
	}
	if req.EnableSSHRemotePortForwarding != nil {
		cfg.EnableSSHRemotePortForwarding = req.GetEnableSSHRemotePortForwarding()
	}
	if req.GetDisableSSHAuth() {
		// Token logins check who a user is; without them any peer a
		// policy lets in logs in with its key.
		if err := requireRoot(ctx, "disabling the SSH server's token authentication"); err != nil {
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
	}
	if req.DisableSSHAuth != nil {
		cfg.DisableSSHAuth = req.GetDisableSSHAuth()
	}
	t, err := mgmtclient.ParseURL(cfg.ManagementURL)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := s.checkIdentity(lctx, &cfg, t, req.GetTrustNewServerKey()); err != nil {
		return nil, err
	}
	if _, err := engine.Login(lctx, t, cfg.Key(), cfg.RotatedSSHKey(), req.GetSetupKey(), cfg.Hostname, s.version, cfg.DisableIPv6, s.log); err != nil {
		if errors.Is(err, mgmtclient.ErrNeedsLogin) && req.GetSetupKey() == "" {
			// Not registered, or its login expired: a person logs in.
			return s.startSSO(lctx, name, cfg, t, req.GetIsUnixDesktopClient())
		}
		if errors.Is(err, mgmtclient.ErrNeedsLogin) || errors.Is(err, mgmtclient.ErrBadSetupKey) {
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if err := s.loggedIn(name, cfg); err != nil {
		return nil, err
	}
	return &daemonpb.LoginResponse{}, nil
}

// loggedIn saves the profile of a successful login and selects it.
func (s *Server) loggedIn(name string, cfg state.Config) error {
	if err := state.Save(s.path(name), cfg); err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	if name != s.active() {
		if err := s.profiles.SetActive(name); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	s.mu.Lock()
	s.needsLogin, s.lastErr = false, ""
	s.mu.Unlock()
	return nil
}

// startSSO begins the SSO login the server offers and tells the CLI what
// the person must do; WaitSSOLogin finishes it. s.op held.
func (s *Server) startSSO(ctx context.Context, name string, cfg state.Config, t mgmtclient.Target, browser bool) (*daemonpb.LoginResponse, error) {
	flow, err := engine.StartSSO(ctx, t, cfg.Key(), browser, s.log)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	p := &ssoLogin{flow: flow, prompt: flow.Prompt(), cfg: cfg, profile: name, target: t}
	s.mu.Lock()
	old := s.pending
	s.pending = p
	s.mu.Unlock()
	if old != nil {
		old.flow.Close()
	}
	return &daemonpb.LoginResponse{NeedsSSOLogin: true, UserCode: p.prompt.UserCode, VerificationURI: p.prompt.VerificationURI,
		VerificationURIComplete: p.prompt.VerificationURIComplete}, nil
}

// WaitSSOLogin waits for the person to finish the SSO login that Login
// started, then logs the peer in with the token.
func (s *Server) WaitSSOLogin(ctx context.Context, req *daemonpb.WaitSSOLoginRequest) (*daemonpb.WaitSSOLoginResponse, error) {
	s.mu.Lock()
	p := s.pending
	s.mu.Unlock()
	if p == nil || p.prompt.UserCode != req.GetUserCode() {
		return nil, status.Error(codes.FailedPrecondition, "no SSO login in progress with this code; run netbird up again")
	}
	tok, err := p.flow.Wait(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil, status.FromContextError(ctx.Err()).Err()
		}
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	if s.pending == p {
		s.pending = nil
	}
	s.mu.Unlock()
	cfg := p.cfg
	if req.GetHostname() != "" {
		cfg.Hostname = req.GetHostname()
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := engine.LoginJWT(lctx, p.target, cfg.Key(), cfg.RotatedSSHKey(), tok.JWT, cfg.Hostname, s.version, cfg.DisableIPv6, s.log); err != nil {
		if errors.Is(err, mgmtclient.ErrSSORefused) {
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if err := s.loggedIn(p.profile, cfg); err != nil {
		return nil, err
	}
	s.log.Info("logged in through SSO", "email", tok.Email)
	return &daemonpb.WaitSSOLoginResponse{Email: tok.Email}, nil
}

// checkIdentity asks the server for its key and compares it with the key
// pinned for that URL at the first login (trust on first use). It pins
// the key into cfg (saved by the caller) when there was none.
func (s *Server) checkIdentity(ctx context.Context, cfg *state.Config, t mgmtclient.Target, trustNew bool) error {
	sk, err := engine.ServerKey(ctx, t, cfg.Key(), s.log)
	if err != nil {
		return status.Error(codes.Unavailable, err.Error())
	}
	pinned := cfg.ServerKeys[t.URL]
	if pinned != "" && pinned != sk.String() && !trustNew {
		return status.Errorf(codes.FailedPrecondition,
			"the management server at %s presents another identity than at first login (server key %s, was %s); nothing was changed. "+
				"If it was reinstalled on purpose, run: netbird up --management-url %s --trust-new-server-key", t.URL, sk, pinned, t.URL)
	}
	if cfg.ServerKeys == nil {
		cfg.ServerKeys = map[string]string{}
	}
	cfg.ServerKeys[t.URL] = sk.String()
	return nil
}

// sameSession reports whether the running engine already serves cfg.
func sameSession(a, b state.Config) bool {
	return a.ManagementURL == b.ManagementURL && a.PrivateKey == b.PrivateKey && a.InterfaceName == b.InterfaceName &&
		a.WireguardPort == b.WireguardPort && a.MTU == b.MTU && a.Hostname == b.Hostname && a.ExitNodeBlockLAN == b.ExitNodeBlockLAN &&
		a.DisableClientRoutes == b.DisableClientRoutes && a.DisableServerRoutes == b.DisableServerRoutes && a.BlockLANAccess == b.BlockLANAccess &&
		a.DisableDNS == b.DisableDNS && a.DisableIPv6 == b.DisableIPv6 &&
		a.ServerSSHAllowed == b.ServerSSHAllowed && a.EnableSSHRoot == b.EnableSSHRoot &&
		a.EnableSSHLocalPortForwarding == b.EnableSSHLocalPortForwarding && a.EnableSSHRemotePortForwarding == b.EnableSSHRemotePortForwarding &&
		a.DisableSSHAuth == b.DisableSSHAuth && a.SSHKey == b.SSHKey
}

// Up connects the active profile. If another session runs (another
// server, profile or interface), it is torn down and the new one started
// in its place, in this process: the switch happens live.
func (s *Server) Up(ctx context.Context, req *daemonpb.UpRequest) (*daemonpb.UpResponse, error) {
	s.op.Lock()
	defer s.op.Unlock()
	name := s.active()
	if req.GetProfileName() != "" && s.fixed == "" && req.GetProfileName() != name {
		if err := s.profiles.SetActive(req.GetProfileName()); err != nil {
			return nil, status.Error(codes.NotFound, err.Error())
		}
		name = req.GetProfileName()
	}
	return &daemonpb.UpResponse{}, s.up(ctx, name)
}

// up starts profile name, replacing a different running session. s.op held.
func (s *Server) up(ctx context.Context, name string) error {
	cfg, err := state.Load(s.path(name))
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error())
	}
	t, err := mgmtclient.ParseURL(cfg.ManagementURL)
	if err != nil {
		return status.Error(codes.FailedPrecondition, err.Error()+" (run: netbird up --management-url URL --setup-key KEY)")
	}
	s.mu.Lock()
	old, oldProfile, oldCfg := s.eng, s.engProfile, s.engConfig
	s.mu.Unlock()
	if old != nil && oldProfile == name && sameSession(oldCfg, cfg) {
		return nil
	}
	// Check the new server before touching the running session.
	ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
	err = s.checkIdentity(ictx, &cfg, t, false)
	cancel()
	if err != nil {
		return err
	}
	if old != nil {
		s.log.Info("switching session", "from_profile", oldProfile, "from", oldCfg.ManagementURL, "to_profile", name, "to", cfg.ManagementURL)
		s.stop()
	}
	if err := s.start(ctx, name, cfg, t); err != nil {
		if old != nil {
			// Put the working session back rather than leave the machine offline.
			if ot, perr := mgmtclient.ParseURL(oldCfg.ManagementURL); perr == nil {
				if rerr := s.start(ctx, oldProfile, oldCfg, ot); rerr != nil {
					s.log.Error("could not restore the previous session", "err", rerr)
				}
			}
		}
		return err
	}
	cfg.Up = true
	if err := state.Save(s.path(name), cfg); err != nil {
		s.log.Warn("save profile", "err", err)
	}
	return nil
}

// engineOptions are the engine's options for profile name: the daemon's
// settings and the profile's, its route selection included.
func (s *Server) engineOptions(name string, cfg state.Config, t mgmtclient.Target) engine.Options {
	return engine.Options{
		Management: t, Private: cfg.Key(), Hostname: cfg.Hostname, Interface: cfg.InterfaceName,
		WGPort: cfg.WireguardPort, MTU: cfg.MTU, Version: s.version, Log: s.log,
		ForceRelay: s.forceRelay, Firewall: s.firewall, KernelWG: s.kernelWG, DisableDNS: cfg.DisableDNS, DisableIPv6: cfg.DisableIPv6, ResolvConf: ResolvConf(s.profiles.Dir), StateDir: s.profiles.Dir,
		Bundle: s.bundleSource(name), RouteSelection: engineSelection(cfg.Routes), ExitNodeLAN: !cfg.ExitNodeBlockLAN,
		DisableClientRoutes: cfg.DisableClientRoutes, DisableServerRoutes: cfg.DisableServerRoutes, BlockLANAccess: cfg.BlockLANAccess,
		AllowServerSSH: cfg.ServerSSHAllowed, AllowSSHRoot: cfg.EnableSSHRoot,
		AllowSSHLocalForwarding: cfg.EnableSSHLocalPortForwarding, AllowSSHRemoteForwarding: cfg.EnableSSHRemotePortForwarding,
		DisableSSHAuth: cfg.DisableSSHAuth, SSHKey: cfg.RotatedSSHKey(), SFTPCommand: s.sftp,
	}
}

// start runs an engine for cfg. s.op held, no engine running.
func (s *Server) start(ctx context.Context, name string, cfg state.Config, t mgmtclient.Target) error {
	var eng session
	o := s.engineOptions(name, cfg, t)
	o.OnFatal = func(err error) {
		s.mu.Lock()
		mine := s.eng == eng && eng != nil
		if mine {
			s.eng = nil
		}
		s.mu.Unlock()
		if mine {
			eng.Stop()
			s.setNeedsLogin(err)
		}
	}
	eng, err := s.startEngine(ctx, o)
	if err != nil {
		if engine.IsPermanent(err) {
			s.setNeedsLogin(err)
			return status.Error(codes.PermissionDenied, err.Error())
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	s.mu.Lock()
	s.eng, s.engProfile, s.engConfig, s.needsLogin, s.lastErr = eng, name, cfg, false, ""
	s.mu.Unlock()
	return nil
}

// Down stops the engine and removes the interface.
func (s *Server) Down(context.Context, *daemonpb.DownRequest) (*daemonpb.DownResponse, error) {
	s.op.Lock()
	defer s.op.Unlock()
	s.stop()
	if cfg, err := state.Load(s.path(s.active())); err == nil && cfg.Up {
		cfg.Up = false
		_ = state.Save(s.path(s.active()), cfg)
	}
	return &daemonpb.DownResponse{}, nil
}

// Logout deregisters the peer and stops.
func (s *Server) Logout(ctx context.Context, _ *daemonpb.LogoutRequest) (*daemonpb.LogoutResponse, error) {
	s.op.Lock()
	defer s.op.Unlock()
	s.mu.Lock()
	e := s.eng
	s.mu.Unlock()
	if e == nil {
		return nil, status.Error(codes.FailedPrecondition, "not connected: run netbird up first")
	}
	if err := e.Logout(ctx); err != nil {
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	s.stop()
	if cfg, err := state.Load(s.path(s.active())); err == nil {
		cfg.Up = false
		_ = state.Save(s.path(s.active()), cfg)
	}
	s.setNeedsLogin(errors.New("logged out"))
	return &daemonpb.LogoutResponse{}, nil
}

// GetConfig reports the stored profile.
func (s *Server) GetConfig(context.Context, *daemonpb.GetConfigRequest) (*daemonpb.GetConfigResponse, error) {
	p := s.path(s.active())
	cfg, err := state.Load(p)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &daemonpb.GetConfigResponse{ManagementUrl: cfg.ManagementURL, ConfigFile: p, DisableIpv6: cfg.DisableIPv6,
		InterfaceName: cfg.InterfaceName, WireguardPort: int64(cfg.WireguardPort), Hostname: cfg.Hostname}, nil
}

// Status reports the engine state.
func (s *Server) Status(context.Context, *daemonpb.StatusRequest) (*daemonpb.StatusResponse, error) {
	s.mu.Lock()
	e, needsLogin, lastErr, prof := s.eng, s.needsLogin, s.lastErr, s.engProfile
	s.mu.Unlock()
	if e == nil {
		prof = s.active()
	}
	resp := &daemonpb.StatusResponse{DaemonVersion: s.version, FullStatus: &daemonpb.FullStatus{}, ProfileName: prof}
	switch {
	case e == nil && needsLogin:
		resp.Status = StatusNeedsLogin
		resp.FullStatus.ManagementState = &daemonpb.ManagementState{Error: lastErr}
		return resp, nil
	case e == nil:
		resp.Status = StatusIdle
		if cfg, err := state.Load(s.path(prof)); err == nil {
			resp.FullStatus.ManagementState = &daemonpb.ManagementState{URL: cfg.ManagementURL}
		}
		return resp, nil
	}
	st := e.Status()
	resp.Status = StatusConnecting
	if st.MgmtConnected {
		resp.Status = StatusConnected
	}
	resp.ServerVersion = st.ServerVersion
	resp.FullStatus = statusProto(st)
	routeStatus(resp.FullStatus, e.Networks())
	return resp, nil
}

func statusProto(st engine.Status) *daemonpb.FullStatus {
	fs := &daemonpb.FullStatus{
		ManagementState: &daemonpb.ManagementState{URL: st.Management, Connected: st.MgmtConnected, Error: st.MgmtError, PendingApproval: st.PendingApproval},
		SignalState:     &daemonpb.SignalState{URL: st.Signal, Connected: st.SignalConn, Error: st.SignalError},
		LocalPeerState: &daemonpb.LocalPeerState{IP: st.Address.String(), PubKey: st.PublicKey.String(), KernelInterface: st.KernelWG,
			Fqdn: st.FQDN, WgPort: int64(st.WGPort), DnsMode: st.DNSMode},
	}
	if !st.Address.IsValid() {
		fs.LocalPeerState.IP = "" // no address yet; not "invalid Prefix"
	}
	if st.Address6.IsValid() {
		fs.LocalPeerState.Ipv6 = st.Address6.String()
	}
	fs.LocalPeerState.Ipv6Mode = st.IPv6Mode
	for _, n := range st.Served {
		fs.LocalPeerState.Networks = append(fs.LocalPeerState.Networks, n.String())
	}
	for _, p := range st.Peers {
		ps := &daemonpb.PeerState{
			IP: p.IP, Ipv6: p.IPv6, PubKey: p.Key.String(), ConnStatus: p.Conn.State, ConnStatusUpdate: timestamppb.New(p.Conn.Since),
			Relayed: p.Conn.Relayed, LocalIceCandidateType: p.Conn.LocalType, RemoteIceCandidateType: p.Conn.RemoteType,
			Fqdn: p.FQDN, LocalIceCandidateEndpoint: p.Conn.LocalEndpoint, RemoteIceCandidateEndpoint: p.Conn.RemoteEndpoint,
			BytesRx: p.RxBytes, BytesTx: p.TxBytes, RelayAddress: p.Conn.RelayAddress, SshHostKey: p.SSHHostKey,
		}
		if !p.LastHandshake.IsZero() {
			ps.LastWireguardHandshake = timestamppb.New(p.LastHandshake)
		}
		fs.Peers = append(fs.Peers, ps)
	}
	for _, r := range st.Relays {
		fs.Relays = append(fs.Relays, &daemonpb.RelayState{URI: r.URI, Available: r.Available, Error: r.Err})
	}
	return fs
}

// ResolvConf is the host resolver file the engine takes over, its original
// kept in the state directory (one per host, whatever the profile).
func ResolvConf(stateDir string) resolvconf.File {
	return resolvconf.File{Path: resolvconf.DefaultPath, Backup: filepath.Join(stateDir, "resolv.conf.original")}
}
