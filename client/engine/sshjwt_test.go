package engine

import (
	"log/slog"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestSSHJWTFromMaps: jwtConfig (with the peer config) and sshAuth (with
// the map) are remembered when a map leaves them out; the verifier is kept
// while jwtConfig is unchanged (it caches the provider's keys); a server
// that sets only the deprecated audience is understood; a malformed
// sshAuth lets no one in; a peer config without jwtConfig ends token
// logins.
func TestSSHJWTFromMaps(t *testing.T) {
	e := &Engine{log: slog.New(slog.DiscardHandler)}
	jc := &mgmtpb.JWTConfig{Issuer: "https://idp/oauth2", Audiences: []string{"cli", "web"}, KeysLocation: "https://idp/oauth2/keys"}
	h := sshserver.HashUserID("u1")
	auth := &mgmtpb.SSHAuth{UserIDClaim: "email", AuthorizedUsers: [][]byte{h[:]}, MachineUsers: map[string]*mgmtpb.MachineUserIndexes{"*": {Indexes: []uint32{0}}}}
	withJWT := func(c *mgmtpb.JWTConfig) *mgmtpb.PeerConfig {
		return &mgmtpb.PeerConfig{SshConfig: &mgmtpb.SSHConfig{SshEnabled: true, JwtConfig: c}}
	}

	if ja := e.sshJWT(&mgmtpb.NetworkMap{}); ja != nil {
		t.Fatalf("no jwtConfig yet: %+v", ja)
	}
	ja := e.sshJWT(&mgmtpb.NetworkMap{PeerConfig: withJWT(jc), SshAuth: auth})
	if ja == nil || ja.Users == nil || ja.Users.Claim != "email" || len(ja.Users.Hashes) != 1 || ja.Users.Hashes[0] != h {
		t.Fatalf("token login %+v", ja)
	}
	cfg := ja.Verifier.Config()
	if cfg.Issuer != jc.Issuer || cfg.KeysLocation != jc.KeysLocation || len(cfg.Audiences) != 2 || cfg.MaxTokenAge != sshserver.DefaultMaxTokenAge {
		t.Errorf("verifier config %+v", cfg)
	}
	// A map without peer config or sshAuth keeps both, and the verifier.
	again := e.sshJWT(&mgmtpb.NetworkMap{})
	if again == nil || again.Verifier != ja.Verifier || again.Users != ja.Users {
		t.Errorf("map without them: %+v", again)
	}
	// The same config sent again keeps the verifier; a changed one not.
	if same := e.sshJWT(&mgmtpb.NetworkMap{PeerConfig: withJWT(jc)}); same.Verifier != ja.Verifier {
		t.Error("same jwtConfig: verifier replaced")
	}
	old := &mgmtpb.JWTConfig{Issuer: jc.Issuer, Audience: "cli", KeysLocation: jc.KeysLocation, MaxTokenAge: 60}
	changed := e.sshJWT(&mgmtpb.NetworkMap{PeerConfig: withJWT(old)})
	if changed == nil || changed.Verifier == ja.Verifier {
		t.Fatal("changed jwtConfig: verifier kept")
	}
	if c := changed.Verifier.Config(); len(c.Audiences) != 1 || c.Audiences[0] != "cli" || c.MaxTokenAge != time.Minute {
		t.Errorf("deprecated audience: %+v", c)
	}
	bad := e.sshJWT(&mgmtpb.NetworkMap{SshAuth: &mgmtpb.SSHAuth{AuthorizedUsers: [][]byte{{1, 2, 3}}}})
	if bad == nil || bad.Users == nil || len(bad.Users.Hashes) != 0 {
		t.Errorf("malformed sshAuth: %+v", bad.Users)
	}
	if e.sshJWT(&mgmtpb.NetworkMap{PeerConfig: withJWT(nil)}) != nil {
		t.Error("peer config without jwtConfig: token logins still on")
	}
	if e.sshJWT(&mgmtpb.NetworkMap{PeerConfig: withJWT(&mgmtpb.JWTConfig{Issuer: "x"})}) != nil {
		t.Error("jwtConfig without audience or keys accepted")
	}
}

// TestDisableSSHAuth: with --disable-ssh-auth the SSH server's access
// takes no tokens (so it does not announce NetBird's JWT requirement and
// NetBird's clients log in with their keys) though management sends a
// jwtConfig; without it, the same map allows token logins. The flag is
// reported to management.
func TestDisableSSHAuth(t *testing.T) {
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	h := sshserver.HashUserID("u1")
	nm := &mgmtpb.NetworkMap{
		PeerConfig: &mgmtpb.PeerConfig{SshConfig: &mgmtpb.SSHConfig{SshEnabled: true,
			JwtConfig: &mgmtpb.JWTConfig{Issuer: "https://idp/oauth2", Audiences: []string{"cli"}, KeysLocation: "https://idp/oauth2/keys"}}},
		SshAuth: &mgmtpb.SSHAuth{AuthorizedUsers: [][]byte{h[:]}, MachineUsers: map[string]*mgmtpb.MachineUserIndexes{"*": {Indexes: []uint32{0}}}},
	}
	for _, disabled := range []bool{false, true} {
		e := &Engine{o: Options{Private: priv, DisableSSHAuth: disabled}, log: slog.New(slog.DiscardHandler)}
		if got := e.sshAccessOf(nm).JWT != nil; got == disabled {
			t.Errorf("DisableSSHAuth=%v: token logins %v", disabled, got)
		}
		if got := e.o.localFlags().GetDisableSSHAuth(); got != disabled {
			t.Errorf("DisableSSHAuth=%v: reported %v", disabled, got)
		}
	}
}
