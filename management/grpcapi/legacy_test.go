package grpcapi

import (
	"testing"

	"github.com/wiremesh/wiremesh/internal/version"
)

// TestLegacyClient: only NetBird clients before 0.29.3 get the legacy
// peer list; our agent's wire version (0.77.1 with build metadata) is
// current, and so is anything unparsable (development builds).
func TestLegacyClient(t *testing.T) {
	for _, tc := range []struct {
		v    string
		want bool
	}{
		{"0.29.2", true},
		{"v0.28.9", true},
		{"0.29.3", false},
		{"0.77.1", false},
		{"0.77.1-rc1", false},
		{"0.29.2+wiremesh.0.1.0", true},
		{version.Wire(), false},
		{"development", false},
		{"", false},
	} {
		if got := legacyClient(tc.v); got != tc.want {
			t.Errorf("legacyClient(%q) = %v, want %v", tc.v, got, tc.want)
		}
	}
}
