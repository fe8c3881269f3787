package server_test

import (
	"context"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestSSHInMaps: PUT /api/peers/{id} ssh_enabled reaches the peer's own
// map as PeerConfig.sshConfig.sshEnabled within 2 s (a delta stream, as
// our agent reads it, and a whole-map one, as the official client reads
// it), is shown by REST, logged as peer.ssh.enable/disable, and a PUT
// without the field leaves it as it is. Every peer's map carries the
// other's SSH public key as reported at login, and never sshEnabled for a
// remote peer.
func TestSSHInMaps(t *testing.T) { engines.Each(t, testSSHInMaps) }

func testSSHInMaps(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	sshKeys := map[string]string{
		"a": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIAdgHkHDVsfH1tS9YQ/1hL0ky6Ne3v6QYX0C5wRGhI5a",
		"b": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIBp8dYy4F0N9X4gkzT0I1VLvPfpvFzA8OHzVxaDHMd6b",
	}
	streams := map[string]*testpeer.Stream{}
	for _, name := range []string{"a", "b"} {
		p := testpeer.New(e.conn, name)
		p.Deltas, p.SSHPubKey = name == "a", sshKeys[name]
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatal(err)
		}
		s, err := p.Sync(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		streams[name] = s
	}
	ids := map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)] = obj(p)["id"].(string)
	}
	other := map[string]string{"a": "b", "b": "a"}
	sshOf := func(nm *mgmtpb.NetworkMap) (self bool, remote string, remoteEnabled bool) {
		rs := nm.GetRemotePeers()
		if len(rs) != 1 {
			return nm.GetPeerConfig().GetSshConfig().GetSshEnabled(), "", false
		}
		return nm.GetPeerConfig().GetSshConfig().GetSshEnabled(), string(rs[0].GetSshConfig().GetSshPubKey()), rs[0].GetSshConfig().GetSshEnabled()
	}
	expect := func(step string, enabled map[string]bool) {
		t.Helper()
		for name, s := range streams {
			if err := s.WaitFor(2*time.Second, func([]*mgmtpb.SyncResponse) bool {
				self, remote, _ := sshOf(s.LatestMap())
				return self == enabled[name] && remote == sshKeys[other[name]]
			}); err != nil {
				self, remote, _ := sshOf(s.LatestMap())
				t.Fatalf("%s: peer %s: %v; sshEnabled %v (want %v), remote key %q (want %q)", step, name, err, self, enabled[name], remote, sshKeys[other[name]])
			}
			if _, _, re := sshOf(s.LatestMap()); re {
				t.Errorf("%s: peer %s: a remote peer's SSHConfig has sshEnabled set", step, name)
			}
		}
		for name, id := range ids {
			if got := obj(o.call("GET", "/api/peers/"+id, nil, 200))["ssh_enabled"]; got != enabled[name] {
				t.Errorf("%s: REST peer %s ssh_enabled = %v, want %v", step, name, got, enabled[name])
			}
		}
	}
	expect("initially", map[string]bool{})

	put := func(id string, body map[string]any) {
		o.call("PUT", "/api/peers/"+id, body, 200)
	}
	put(ids["b"], map[string]any{"name": "b", "ssh_enabled": true, "login_expiration_enabled": false})
	expect("b enabled", map[string]bool{"b": true})
	put(ids["b"], map[string]any{"name": "b", "login_expiration_enabled": false}) // no ssh_enabled: unchanged
	expect("b renamed without ssh_enabled", map[string]bool{"b": true})
	put(ids["a"], map[string]any{"name": "a", "ssh_enabled": true, "login_expiration_enabled": false})
	put(ids["b"], map[string]any{"name": "b", "ssh_enabled": false, "login_expiration_enabled": false})
	expect("a enabled, b disabled", map[string]bool{"a": true})

	codes := map[string]int{}
	for _, ev := range list(o.call("GET", "/api/events", nil, 200)) {
		codes[obj(ev)["activity_code"].(string)]++
	}
	if codes["peer.ssh.enable"] != 2 || codes["peer.ssh.disable"] != 1 {
		t.Errorf("events: peer.ssh.enable %d (want 2), peer.ssh.disable %d (want 1)", codes["peer.ssh.enable"], codes["peer.ssh.disable"])
	}
}
