// Package daemon is the agent's local service (`netbird service run`): it
// owns the engine and the profile, and answers the CLI over a unix socket
// with the daemon.DaemonService API. Only one engine runs at a time.
package daemon

import (
	"context"
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
	configPath string
	version    string
	log        *slog.Logger
	forceRelay bool

	mu         sync.Mutex
	eng        *engine.Engine
	needsLogin bool
	lastErr    string
}

// Options are the daemon's settings beyond the profile.
type Options struct {
	// ForceRelay disables ICE (NB_FORCE_RELAY=true).
	ForceRelay bool
}

// New returns a daemon using the profile at configPath.
func New(configPath, version string, log *slog.Logger, o Options) *Server {
	return &Server{configPath: configPath, version: version, log: log, forceRelay: o.ForceRelay}
}

// Serve listens on addr ("unix:///path") until ctx ends. If the profile
// says the agent was up, it comes up again.
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
	g := grpc.NewServer()
	daemonpb.RegisterDaemonServiceServer(g, s)
	errc := make(chan error, 1)
	go func() { errc <- g.Serve(ln) }()
	s.log.Info("daemon listening", "addr", addr)
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	g.Stop()
	s.stop()
	_ = os.Remove(path)
	return err
}

func (s *Server) stop() {
	s.mu.Lock()
	e := s.eng
	s.eng = nil
	s.mu.Unlock()
	if e != nil {
		e.Stop()
	}
}

// Login stores the options and registers the peer with the setup key.
func (s *Server) Login(ctx context.Context, req *daemonpb.LoginRequest) (*daemonpb.LoginResponse, error) {
	cfg, err := state.Load(s.configPath)
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
	t, err := mgmtclient.ParseURL(cfg.ManagementURL)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	if err := state.Save(s.configPath, cfg); err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := engine.Login(lctx, t, cfg.Key(), req.GetSetupKey(), cfg.Hostname, s.version, s.log); err != nil {
		if errors.Is(err, mgmtclient.ErrNeedsLogin) || errors.Is(err, mgmtclient.ErrBadSetupKey) {
			s.setNeedsLogin(err)
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	s.mu.Lock()
	s.needsLogin, s.lastErr = false, ""
	s.mu.Unlock()
	return &daemonpb.LoginResponse{}, nil
}

func (s *Server) setNeedsLogin(err error) {
	s.mu.Lock()
	s.needsLogin, s.lastErr = true, err.Error()
	s.mu.Unlock()
}

// Up starts the engine with the stored profile.
func (s *Server) Up(ctx context.Context, _ *daemonpb.UpRequest) (*daemonpb.UpResponse, error) {
	s.mu.Lock()
	running := s.eng != nil
	s.mu.Unlock()
	if running {
		return &daemonpb.UpResponse{}, nil
	}
	cfg, err := state.Load(s.configPath)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	t, err := mgmtclient.ParseURL(cfg.ManagementURL)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	var eng *engine.Engine
	eng, err = engine.Start(ctx, engine.Options{
		Management: t, Private: cfg.Key(), Hostname: cfg.Hostname, Interface: cfg.InterfaceName,
		WGPort: cfg.WireguardPort, MTU: cfg.MTU, Version: s.version, Log: s.log,
		ForceRelay: s.forceRelay,
		OnFatal: func(err error) {
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
		},
	})
	if err != nil {
		if engine.IsPermanent(err) {
			s.setNeedsLogin(err)
			return nil, status.Error(codes.PermissionDenied, err.Error())
		}
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	s.mu.Lock()
	if s.eng != nil { // a concurrent Up won
		s.mu.Unlock()
		eng.Stop()
		return &daemonpb.UpResponse{}, nil
	}
	s.eng, s.needsLogin, s.lastErr = eng, false, ""
	s.mu.Unlock()
	return &daemonpb.UpResponse{}, nil
}

// Down stops the engine and removes the interface.
func (s *Server) Down(context.Context, *daemonpb.DownRequest) (*daemonpb.DownResponse, error) {
	s.stop()
	return &daemonpb.DownResponse{}, nil
}

// Logout deregisters the peer and stops.
func (s *Server) Logout(ctx context.Context, _ *daemonpb.LogoutRequest) (*daemonpb.LogoutResponse, error) {
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
	s.setNeedsLogin(errors.New("logged out"))
	return &daemonpb.LogoutResponse{}, nil
}

// GetConfig reports the stored profile.
func (s *Server) GetConfig(context.Context, *daemonpb.GetConfigRequest) (*daemonpb.GetConfigResponse, error) {
	cfg, err := state.Load(s.configPath)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	return &daemonpb.GetConfigResponse{ManagementUrl: cfg.ManagementURL, ConfigFile: s.configPath,
		InterfaceName: cfg.InterfaceName, WireguardPort: int64(cfg.WireguardPort), Hostname: cfg.Hostname}, nil
}

// Status reports the engine state.
func (s *Server) Status(context.Context, *daemonpb.StatusRequest) (*daemonpb.StatusResponse, error) {
	s.mu.Lock()
	e, needsLogin, lastErr := s.eng, s.needsLogin, s.lastErr
	s.mu.Unlock()
	resp := &daemonpb.StatusResponse{DaemonVersion: s.version, FullStatus: &daemonpb.FullStatus{}}
	switch {
	case e == nil && needsLogin:
		resp.Status = StatusNeedsLogin
		resp.FullStatus.ManagementState = &daemonpb.ManagementState{Error: lastErr}
		return resp, nil
	case e == nil:
		resp.Status = StatusIdle
		if cfg, err := state.Load(s.configPath); err == nil {
			resp.FullStatus.ManagementState = &daemonpb.ManagementState{URL: cfg.ManagementURL}
		}
		return resp, nil
	}
	st := e.Status()
	resp.Status = StatusConnecting
	if st.MgmtConnected {
		resp.Status = StatusConnected
	}
	resp.FullStatus = statusProto(st)
	return resp, nil
}

func statusProto(st engine.Status) *daemonpb.FullStatus {
	fs := &daemonpb.FullStatus{
		ManagementState: &daemonpb.ManagementState{URL: st.Management, Connected: st.MgmtConnected, Error: st.MgmtError},
		SignalState:     &daemonpb.SignalState{URL: st.Signal, Connected: st.SignalConn, Error: st.SignalError},
		LocalPeerState: &daemonpb.LocalPeerState{IP: st.Address.String(), PubKey: st.PublicKey.String(), KernelInterface: st.KernelWG,
			Fqdn: st.FQDN, WgPort: int64(st.WGPort)},
	}
	for _, p := range st.Peers {
		ps := &daemonpb.PeerState{
			IP: p.IP, PubKey: p.Key.String(), ConnStatus: p.Conn.State, ConnStatusUpdate: timestamppb.New(p.Conn.Since),
			Relayed: p.Conn.Relayed, LocalIceCandidateType: p.Conn.LocalType, RemoteIceCandidateType: p.Conn.RemoteType,
			Fqdn: p.FQDN, LocalIceCandidateEndpoint: p.Conn.LocalEndpoint, RemoteIceCandidateEndpoint: p.Conn.RemoteEndpoint,
			BytesRx: p.RxBytes, BytesTx: p.TxBytes, RelayAddress: p.Conn.RelayAddress,
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
