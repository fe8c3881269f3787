package daemon

import (
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/state"
)

// TestDisableSSHAuthProfile: --disable-ssh-auth is kept in the profile
// (read again after a restart), reaches the engine, and changing it
// restarts the session.
func TestDisableSSHAuthProfile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	cfg, err := state.Load(path) // a fresh profile
	if err != nil {
		t.Fatal(err)
	}
	cfg.DisableSSHAuth = true
	if err := state.Save(path, cfg); err != nil {
		t.Fatal(err)
	}
	got, err := state.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if !got.DisableSSHAuth {
		t.Fatal("disable_ssh_auth not kept in the profile")
	}
	s := New("test", slog.New(slog.DiscardHandler), Options{StateDir: dir})
	if !s.engineOptions("default", got, mgmtclient.Target{}).DisableSSHAuth {
		t.Error("the engine does not get DisableSSHAuth")
	}
	other := got
	other.DisableSSHAuth = false
	if sameSession(got, other) {
		t.Error("changing --disable-ssh-auth does not restart the session")
	}
}
