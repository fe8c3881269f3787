package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// loginServer is the part of a management server the key rotation
// talks to: its key and Login, which records the SSH key each login
// reports (or refuses, with refuse set).
type loginServer struct {
	mgmtpb.UnimplementedManagementServiceServer
	priv key.Private

	mu     sync.Mutex
	sshKey string
	logins int
	refuse error
}

func (l *loginServer) GetServerKey(context.Context, *mgmtpb.Empty) (*mgmtpb.ServerKeyResponse, error) {
	return &mgmtpb.ServerKeyResponse{Key: l.priv.Public().String()}, nil
}

func (l *loginServer) Login(_ context.Context, m *mgmtpb.EncryptedMessage) (*mgmtpb.EncryptedMessage, error) {
	pk, err := key.ParsePublic(m.GetWgPubKey())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	sh := envelope.NewShared(l.priv, pk)
	var lr mgmtpb.LoginRequest
	if err := sh.OpenProto(m.GetBody(), &lr); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != nil {
		return nil, l.refuse
	}
	l.sshKey, l.logins = string(lr.GetPeerKeys().GetSshPubKey()), l.logins+1
	body, err := sh.SealProto(&mgmtpb.LoginResponse{
		NetbirdConfig: &mgmtpb.NetbirdConfig{Signal: &mgmtpb.HostConfig{Uri: "127.0.0.1:1"}},
		PeerConfig:    &mgmtpb.PeerConfig{Address: "100.64.0.1/16"}})
	if err != nil {
		return nil, err
	}
	return &mgmtpb.EncryptedMessage{WgPubKey: l.priv.Public().String(), Body: body}, nil
}

func (l *loginServer) reported() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.sshKey, l.logins
}

func (l *loginServer) setRefuse(err error) {
	l.mu.Lock()
	l.refuse = err
	l.mu.Unlock()
}

func startLoginServer(t *testing.T) (*loginServer, string) {
	t.Helper()
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &loginServer{priv: priv}
	g := grpc.NewServer()
	mgmtpb.RegisterManagementServiceServer(g, l)
	go func() { _ = g.Serve(ln) }()
	t.Cleanup(g.Stop)
	return l, "http://" + ln.Addr().String()
}

// TestRotateSSHKey: netbird ssh rotate-key through the daemon. Only root
// may rotate; management takes the new key at a login before the
// profile keeps it (0600, read again after a restart) and before the
// running session serves with it; a refusal by management or by the
// session changes nothing; a profile that never rotated keeps reporting
// the key derived from its WireGuard key.
func TestRotateSSHKey(t *testing.T) {
	ctx := context.Background()
	asRoot := peer.NewContext(ctx, &peer.Peer{AuthInfo: peerCred{UID: 0}})
	asUser := peer.NewContext(ctx, &peer.Peer{AuthInfo: peerCred{UID: 1000}})
	mgmt, url := startLoginServer(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	var engs []*fakeEngine
	newServer := func() *Server {
		s := New("test", slog.New(slog.DiscardHandler), Options{StateDir: dir})
		s.startEngine = func(_ context.Context, o engine.Options) (session, error) {
			f := &fakeEngine{opts: o}
			engs = append(engs, f)
			return f, nil
		}
		return s
	}
	s := newServer()
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}

	// Not registered yet.
	if _, err := s.RotateSSHKey(asRoot, &daemonpb.RotateSSHKeyRequest{}); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "netbird up") {
		t.Fatalf("unregistered: %v", err)
	}
	cfg, err := state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ManagementURL = url
	if err := state.Save(path, cfg); err != nil {
		t.Fatal(err)
	}
	derived, err := sshserver.AuthorizedKey(cfg.Key())
	if err != nil {
		t.Fatal(err)
	}
	// The profile that never rotated logs in with the derived key.
	if _, err := s.Login(ctx, &daemonpb.LoginRequest{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := mgmt.reported(); got != derived {
		t.Fatalf("login before any rotation reported %q, want the derived %q", got, derived)
	}
	before := read()

	// Refusals leave the profile and management as they were.
	if _, err := s.RotateSSHKey(asUser, &daemonpb.RotateSSHKeyRequest{}); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "needs root") {
		t.Fatalf("as uid 1000: %v", err)
	}
	if _, err := s.RotateSSHKey(ctx, &daemonpb.RotateSSHKeyRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("without credentials: %v", err)
	}
	mgmt.setRefuse(status.Error(codes.PermissionDenied, "SSH key already used by another peer"))
	_, err = s.RotateSSHKey(asRoot, &daemonpb.RotateSSHKeyRequest{})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "already used by another peer") || !strings.Contains(err.Error(), "old one stays") {
		t.Fatalf("management refusing the key: %v", err)
	}
	mgmt.setRefuse(nil)
	if after := read(); after != before {
		t.Fatalf("a refused rotation changed the profile:\n%s\n->\n%s", before, after)
	}
	if got, _ := mgmt.reported(); got != derived {
		t.Fatalf("management has %q after a refused rotation, want %q", got, derived)
	}

	// Rotation without a running session.
	resp, err := s.RotateSSHKey(asRoot, &daemonpb.RotateSSHKeyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.GetOldSshPubKey() != derived || resp.GetSshPubKey() == derived || !strings.HasPrefix(resp.GetSshPubKey(), "ssh-ed25519 ") {
		t.Fatalf("response %+v, old want %q", resp, derived)
	}
	if got, _ := mgmt.reported(); got != resp.GetSshPubKey() {
		t.Fatalf("management has %q, want the new %q", got, resp.GetSshPubKey())
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("profile mode %v, %v", fi.Mode(), err)
	}
	// A restart (a new daemon) reads the new key back: its engine and its
	// logins use it.
	s = newServer()
	cfg, err = state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := sshserver.AuthorizedKeyOf(cfg.RotatedSSHKey()); cfg.RotatedSSHKey() == nil || got != resp.GetSshPubKey() {
		t.Fatalf("profile after restart holds %q, want %q", got, resp.GetSshPubKey())
	}
	if _, err := s.Up(ctx, &daemonpb.UpRequest{}); err != nil {
		t.Fatal(err)
	}
	if len(engs) != 1 || !engs[0].opts.SSHKey.Equal(cfg.RotatedSSHKey()) {
		t.Fatalf("engine started with SSH key %v, want the profile's", engs)
	}
	if _, err := s.Login(ctx, &daemonpb.LoginRequest{}); err != nil {
		t.Fatal(err)
	}
	if got, _ := mgmt.reported(); got != resp.GetSshPubKey() {
		t.Fatalf("a later login reported %q, want the rotated %q (it would undo the rotation)", got, resp.GetSshPubKey())
	}

	// Rotation with a running session: the session reports and applies
	// it, and stays up (no restart for the new key).
	eng := engs[0]
	eng.rotateErr = errors.New("management unreachable")
	before = read()
	if _, err := s.RotateSSHKey(asRoot, &daemonpb.RotateSSHKeyRequest{}); status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "management unreachable") {
		t.Fatalf("session failing to report the key: %v", err)
	}
	if after := read(); after != before {
		t.Fatal("a failed rotation changed the profile")
	}
	eng.rotateErr = nil
	resp2, err := s.RotateSSHKey(asRoot, &daemonpb.RotateSSHKeyRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if resp2.GetOldSshPubKey() != resp.GetSshPubKey() || resp2.GetSshPubKey() == resp.GetSshPubKey() {
		t.Fatalf("second rotation %+v after %q", resp2, resp.GetSshPubKey())
	}
	if got, _ := sshserver.AuthorizedKeyOf(eng.sshKey); eng.sshKey == nil || got != resp2.GetSshPubKey() {
		t.Fatalf("session applied %q, want %q", got, resp2.GetSshPubKey())
	}
	if _, err := s.Up(ctx, &daemonpb.UpRequest{}); err != nil {
		t.Fatal(err)
	}
	if len(engs) != 1 || eng.isStopped() {
		t.Fatalf("up after the rotation restarted the session (%d engines)", len(engs))
	}
	cfg, _ = state.Load(path)
	if got, _ := sshserver.AuthorizedKeyOf(cfg.RotatedSSHKey()); got != resp2.GetSshPubKey() {
		t.Fatalf("profile holds %q, want %q", got, resp2.GetSshPubKey())
	}
}
