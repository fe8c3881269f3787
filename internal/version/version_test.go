package version

import (
	"regexp"
	"testing"
)

// semverRE is the regular expression semver.org publishes for a valid
// version; NetBird's parsers (hashicorp/go-version, x/mod/semver) accept
// what it accepts and ignore build metadata when comparing.
var semverRE = regexp.MustCompile(`^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

func TestWire(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	for _, tc := range []struct{ ours, want string }{
		{"0.2.0", "0.77.1+wiremesh.0.2.0"},
		{"v0.2.0", "0.77.1+wiremesh.0.2.0"},
		{"0.1.0-3-gabc1234-dirty", "0.77.1+wiremesh.0.1.0-3-gabc1234-dirty"},
		{"af9e2d3", "0.77.1+wiremesh.af9e2d3"},            // git describe --always without a tag
		{"1.0 beta/2..x", "0.77.1+wiremesh.1.0-beta-2.x"}, // spaces, slashes, empty identifiers
		{"", "0.77.1+wiremesh"},
		{"...", "0.77.1+wiremesh"},
	} {
		Version = tc.ours
		got := Wire()
		if got != tc.want {
			t.Errorf("Version %q: Wire() = %q, want %q", tc.ours, got, tc.want)
		}
		m := semverRE.FindStringSubmatch(got)
		if m == nil {
			t.Errorf("Version %q: Wire() = %q is not a semantic version", tc.ours, got)
			continue
		}
		// No pre-release part: a pre-release sorts below the NetBird
		// release and fails NetBird's "at least" checks.
		if m[1]+"."+m[2]+"."+m[3] != NetBird || m[4] != "" {
			t.Errorf("Version %q: Wire() = %q does not compare equal to NetBird %s", tc.ours, got, NetBird)
		}
	}
}

func TestString(t *testing.T) {
	defer func(v string) { Version = v }(Version)
	Version = "0.2.0"
	if got, want := String(), "0.2.0 (wiremesh; NetBird 0.77.1 protocol)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestDefaultIsOurRelease(t *testing.T) {
	if !semverRE.MatchString(Version) || Version == NetBird {
		t.Errorf("Version %q must be this project's own semantic version, not NetBird's %s", Version, NetBird)
	}
}
