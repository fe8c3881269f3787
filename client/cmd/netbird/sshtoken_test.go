package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// TestSSHTokenNamesPeer: before any login starts, netbird ssh says on
// stderr which peer (name and overlay IP) the identity token goes to.
func TestSSHTokenNamesPeer(t *testing.T) {
	var out bytes.Buffer
	// No profile: the login cannot start, but the notice comes first.
	tok := sshToken(filepath.Join(t.TempDir(), "missing.json"), true, "db.netbird.cloud", "100.64.0.9", &out)
	if _, err := tok(context.Background()); err == nil {
		t.Fatal("token without a profile")
	}
	if got := out.String(); !strings.Contains(got, "db.netbird.cloud (100.64.0.9)") || !strings.Contains(got, "identity token will be sent") {
		t.Fatalf("stderr %q does not name the peer the token goes to", got)
	}
}
