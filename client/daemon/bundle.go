package daemon

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/wiremesh/wiremesh/client/debugbundle"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/proto/daemonpb"
)

// bundleSource is what a remote debug bundle of profile name collects:
// the daemon's full status (its StatusResponse with every peer, as JSON),
// the profile, the daemon's log and goroutines.
func (s *Server) bundleSource(name string) *debugbundle.Source {
	return &debugbundle.Source{
		Version: "netbird daemon " + s.version,
		Status: func(ctx context.Context) ([]byte, error) {
			r, err := s.Status(ctx, &daemonpb.StatusRequest{GetFullPeerStatus: true})
			if err != nil {
				return nil, fmt.Errorf("status: %w", err)
			}
			b, err := protojson.MarshalOptions{EmitUnpopulated: true}.Marshal(r)
			if err != nil {
				return nil, fmt.Errorf("status: %w", err)
			}
			// protojson varies its spacing on purpose: indent it stably.
			var out bytes.Buffer
			if err := json.Indent(&out, b, "", "  "); err != nil {
				return nil, fmt.Errorf("status: %w", err)
			}
			return out.Bytes(), nil
		},
		Profile: func() (state.Config, error) {
			p := s.path(name)
			if _, err := os.Stat(p); err != nil { // Load would create it
				return state.Config{}, fmt.Errorf("profile %s: %w", name, err)
			}
			return state.Load(p)
		},
		LogFile: s.logFile,
		Level:   s.logLevel,
		Stacks:  true,
		Log:     s.log,
	}
}
