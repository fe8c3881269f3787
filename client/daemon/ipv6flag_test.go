package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// TestDisableIPv6ReachesEngine: the profile's --disable-ipv6 survives a
// save and load and reaches the engine; changing it restarts the session
// (the capability is announced at login); GetConfig reports it.
func TestDisableIPv6ReachesEngine(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	r := newRig(t)
	mgmt := startKeyServer(t)
	c, _ := r.start()
	path := filepath.Join(r.dir, "config.json")
	for i, disable := range []bool{true, true, false} {
		cfg, err := state.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ManagementURL, cfg.DisableIPv6 = mgmt, disable
		if err := state.Save(path, cfg); err != nil {
			t.Fatal(err)
		}
		if back, err := state.Load(path); err != nil || back.DisableIPv6 != disable {
			t.Fatalf("step %d: profile reloaded with DisableIPv6=%v (%v), want %v", i, back.DisableIPv6, err, disable)
		}
		if _, err := c.Up(ctx, &daemonpb.UpRequest{}); err != nil {
			t.Fatal(err)
		}
		if got := r.last().opts.DisableIPv6; got != disable {
			t.Errorf("step %d: engine got DisableIPv6=%v, want %v", i, got, disable)
		}
		// The official UI reads the setting from GetConfig (field 27).
		if gc, err := c.GetConfig(ctx, &daemonpb.GetConfigRequest{}); err != nil || gc.GetDisableIpv6() != disable {
			t.Errorf("step %d: GetConfig disable_ipv6=%v (%v), want %v", i, gc.GetDisableIpv6(), err, disable)
		}
	}
	if got := r.started(); got != 2 {
		t.Errorf("%d sessions started, want 2 (one per change)", got)
	}
}
