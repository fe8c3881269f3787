package engine

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/sshaudit"
	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestSetSSHKeyRestartsServer: a rotated key takes over the running SSH
// server on the same address and ports: it presents the new host key,
// no longer the old one, and a map applied later keeps it.
func TestSetSSHKeyRestartsServer(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("the SSH server's ports (22, 22022) need root")
	}
	self, _ := key.NewPrivate()
	mc, err := mgmtclient.Dial(mgmtclient.Target{Addr: "127.0.0.1:1", URL: "http://127.0.0.1:1"}, self, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	e := &Engine{o: Options{Private: self, AllowServerSSH: true}, log: slog.New(slog.DiscardHandler), mgmt: mc,
		addr: netip.MustParsePrefix("127.0.0.43/8"), audit: sshaudit.New(sshaudit.Options{})}
	on := &mgmtpb.NetworkMap{PeerConfig: &mgmtpb.PeerConfig{SshConfig: &mgmtpb.SSHConfig{SshEnabled: true}}, FirewallRulesIsEmpty: true}
	if old := e.applySSH(on); old != nil || e.ssh.srv == nil {
		t.Fatal("SSH not started")
	}
	t.Cleanup(e.stopSSH)
	derived, _ := sshserver.HostKey(self)
	client, _ := sshserver.HostKey(self) // no peer in the map: logins fail after the host key check
	hostKeyOf := func(want ssh.PublicKey) error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := sshclient.Dial(ctx, "127.0.0.43:22022", "root", client, want)
		if err == nil {
			c.Close()
		}
		return err
	}
	if err := hostKeyOf(derived.PublicKey()); errors.Is(err, sshclient.ErrHostKey) || err == nil {
		t.Fatalf("before the rotation, the derived host key: %v (want a login refusal past the host key)", err)
	}
	_, rotated, _ := ed25519.GenerateKey(rand.Reader)
	newKey, _ := sshserver.Signer(rotated)
	first := e.ssh.srv
	e.SetSSHKey(rotated)
	if e.ssh.srv == nil || e.ssh.srv == first || !e.ssh.on {
		t.Fatalf("server not restarted: %p (was %p)", e.ssh.srv, first)
	}
	if err := hostKeyOf(derived.PublicKey()); !errors.Is(err, sshclient.ErrHostKey) {
		t.Errorf("the old host key after the rotation: %v, want a host key mismatch", err)
	}
	if err := hostKeyOf(newKey.PublicKey()); errors.Is(err, sshclient.ErrHostKey) || err == nil {
		t.Errorf("the new host key: %v", err)
	}
	// A later map keeps the server and its key.
	srv := e.ssh.srv
	if old := e.applySSH(on); old != nil || e.ssh.srv != srv {
		t.Fatal("a later map replaced the server")
	}
	if err := hostKeyOf(newKey.PublicKey()); errors.Is(err, sshclient.ErrHostKey) {
		t.Errorf("the new host key after a map: %v", err)
	}
}
