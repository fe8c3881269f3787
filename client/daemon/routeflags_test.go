package daemon

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// TestRouteFlagsReachEngine: the profile's route flags (netbird up
// --disable-client-routes, --disable-server-routes, --block-lan-access)
// reach the engine, and changing one restarts the session so it takes
// effect; an unchanged profile leaves the running session alone.
func TestRouteFlagsReachEngine(t *testing.T) {
	noLeaks(t)
	ctx := context.Background()
	r := newRig(t)
	mgmt := startKeyServer(t)
	c, _ := r.start()
	path := filepath.Join(r.dir, "config.json")
	save := func(client, server, lan bool) {
		t.Helper()
		cfg, err := state.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ManagementURL, cfg.DisableClientRoutes, cfg.DisableServerRoutes, cfg.BlockLANAccess = mgmt, client, server, lan
		if err := state.Save(path, cfg); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range []struct{ client, server, lan bool }{
		{false, true, false}, {false, true, false}, {true, false, true}, {false, false, false},
	} {
		save(tc.client, tc.server, tc.lan)
		if _, err := c.Up(ctx, &daemonpb.UpRequest{}); err != nil {
			t.Fatal(err)
		}
		o := r.last().opts
		if o.DisableClientRoutes != tc.client || o.DisableServerRoutes != tc.server || o.BlockLANAccess != tc.lan {
			t.Errorf("step %d: engine got client=%v server=%v lan=%v, want %+v", i, o.DisableClientRoutes, o.DisableServerRoutes, o.BlockLANAccess, tc)
		}
	}
	// Steps 0 and 1 are the same profile: one session for both.
	if got := r.started(); got != 3 {
		t.Errorf("%d sessions started, want 3 (one per change)", got)
	}
}
