package daemon

import (
	"context"
	"crypto/ed25519"
	"errors"
	"time"

	"golang.org/x/crypto/ssh"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/engine"
	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// RotateSSHKey gives this peer a new random SSH key (netbird ssh
// rotate-key) in place of the one it has (derived from its WireGuard key,
// or rotated before); the WireGuard key stays. Management takes the new
// key at a login first: if it refuses it or cannot be reached, nothing
// changes. Then the profile keeps it and the running SSH server serves
// with it; every peer's next map carries it, so servers refuse the old
// client key and `netbird ssh` refuses a server still presenting the old
// host key.
func (s *Server) RotateSSHKey(ctx context.Context, _ *daemonpb.RotateSSHKeyRequest) (*daemonpb.RotateSSHKeyResponse, error) {
	// The key opens other peers' SSH servers, and the profile is root's.
	if err := requireRoot(ctx, "rotating this peer's SSH key"); err != nil {
		return nil, status.Error(codes.PermissionDenied, err.Error())
	}
	s.op.Lock()
	defer s.op.Unlock()
	name := s.active()
	cfg, err := state.Load(s.path(name))
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	if cfg.ManagementURL == "" {
		return nil, status.Error(codes.FailedPrecondition, "this peer is not registered yet: run netbird up first")
	}
	t, err := mgmtclient.ParseURL(cfg.ManagementURL)
	if err != nil {
		return nil, status.Error(codes.FailedPrecondition, err.Error())
	}
	old := cfg.RotatedSSHKey()
	oldPub, err := agentPub(cfg.Key(), old)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	pemKey, k, err := state.NewSSHKey()
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	newPub, err := sshserver.AuthorizedKeyOf(k)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	// The key goes only to the server pinned at first login.
	if err := s.checkIdentity(lctx, &cfg, t, false); err != nil {
		return nil, err
	}
	s.mu.Lock()
	e := s.eng
	if s.engProfile != name {
		e = nil
	}
	s.mu.Unlock()
	report := func(ctx context.Context, k ed25519.PrivateKey) error {
		if e != nil {
			// The running session logs in with its own metadata and
			// switches its SSH server to k.
			return e.RotateSSHKey(ctx, k)
		}
		_, err := engine.Login(ctx, t, cfg.Key(), k, "", cfg.Hostname, s.version, cfg.DisableIPv6, s.log)
		return err
	}
	if err := report(lctx, k); err != nil {
		code := codes.Unavailable
		if errors.Is(err, mgmtclient.ErrNeedsLogin) {
			code = codes.FailedPrecondition // its login expired, or a duplicate key
		}
		return nil, status.Errorf(code, "management did not take the new SSH key; the old one stays: %v", err)
	}
	cfg.SSHKey = pemKey
	if err := state.Save(s.path(name), cfg); err != nil {
		// Put the old key back where it was reported, so management, the
		// server and the profile agree.
		if rerr := report(lctx, old); rerr != nil {
			return nil, status.Errorf(codes.Internal, "saving the new SSH key: %v; management could not be set back to the old key (%v): run netbird ssh rotate-key again", err, rerr)
		}
		return nil, status.Errorf(codes.Internal, "saving the new SSH key: %v; the old key stays", err)
	}
	s.mu.Lock()
	if s.eng == e && e != nil {
		s.engConfig.SSHKey = pemKey // the session already serves with it
	}
	s.mu.Unlock()
	s.log.Info("SSH key rotated", "profile", name, "old", fingerprint(oldPub), "new", fingerprint(newPub))
	return &daemonpb.RotateSSHKeyResponse{SshPubKey: newPub, OldSshPubKey: oldPub}, nil
}

// agentPub is the public half of the agent's SSH key (rotated, or
// derived from priv when nil) in authorized_keys form.
func agentPub(priv key.Private, rotated ed25519.PrivateKey) (string, error) {
	k, err := sshserver.AgentKey(priv, rotated)
	if err != nil {
		return "", err
	}
	return sshserver.AuthorizedKeyOf(k)
}

// fingerprint is an authorized_keys line's SHA256 fingerprint, for logs.
func fingerprint(authorized string) string {
	k, _, _, _, err := ssh.ParseAuthorizedKey([]byte(authorized))
	if err != nil {
		return "?"
	}
	return ssh.FingerprintSHA256(k)
}
