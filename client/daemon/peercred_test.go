package daemon

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// TestSSHSettingsNeedRoot: turning on the SSH server, root login or
// port forwarding through the daemon socket needs a caller whose uid the
// kernel reports as 0; others (the socket's group) are refused and
// nothing is stored. Turning them off, or other settings, stays open.
func TestSSHSettingsNeedRoot(t *testing.T) {
	ctx := context.Background()
	r := newRig(t)
	c, _ := r.start()
	on := true
	// Through the real socket, as the test's own uid.
	_, err := c.Login(ctx, &daemonpb.LoginRequest{ServerSSHAllowed: &on, ManagementUrl: "https://127.0.0.1:1"})
	refused := status.Code(err) == codes.PermissionDenied && strings.Contains(err.Error(), "needs root")
	if refused != (os.Getuid() != 0) {
		t.Fatalf("uid %d over the socket: %v", os.Getuid(), err)
	}

	s := New("test", slog.New(slog.DiscardHandler), Options{StateDir: r.dir})
	path := filepath.Join(r.dir, "config.json")
	before, _ := os.ReadFile(path)
	asUser := peer.NewContext(ctx, &peer.Peer{AuthInfo: peerCred{UID: 1000}})
	for name, req := range map[string]*daemonpb.LoginRequest{
		"allow-server-ssh":                  {ServerSSHAllowed: &on},
		"enable-ssh-root":                   {EnableSSHRoot: &on},
		"enable-ssh-local-port-forwarding":  {EnableSSHLocalPortForwarding: &on},
		"enable-ssh-remote-port-forwarding": {EnableSSHRemotePortForwarding: &on},
		"disable-ssh-auth":                  {DisableSSHAuth: &on},
	} {
		if _, err := s.Login(asUser, req); status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "needs root") {
			t.Errorf("%s as uid 1000: %v", name, err)
		}
		// Without credentials (not through the socket) too.
		if _, err := s.Login(ctx, req); status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s without credentials: %v", name, err)
		}
	}
	if after, _ := os.ReadFile(path); string(after) != string(before) {
		t.Errorf("a refused login changed the profile:\n%s\n->\n%s", before, after)
	}
	cfg, _ := state.Load(path)
	if cfg.ServerSSHAllowed && os.Getuid() != 0 {
		t.Errorf("SSH allowed by a non-root caller")
	}
	off := false
	if _, err := s.Login(asUser, &daemonpb.LoginRequest{ServerSSHAllowed: &off}); err != nil && strings.Contains(err.Error(), "needs root") {
		t.Errorf("turning SSH off as uid 1000: %v", err)
	}
}
