package daemon

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/client/debugbundle"
	"github.com/wiremesh/wiremesh/client/state"
)

// A daemon's bundle holds its own status and the profile without its key.
func TestBundleSource(t *testing.T) {
	dir := t.TempDir()
	logFile := filepath.Join(dir, "client.log")
	if err := os.WriteFile(logFile, []byte("level=INFO msg=started\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lv := new(slog.LevelVar)
	s := New("1.2.3", slog.New(slog.DiscardHandler), Options{StateDir: dir, LogFile: logFile, LogLevel: lv})
	cfg, err := state.Load(s.path(state.DefaultProfile))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	src := s.bundleSource(state.DefaultProfile)
	src.Commands = map[string][]string{}
	if _, err := debugbundle.Build(context.Background(), *src, debugbundle.Options{}, &out); err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(&out)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		files[h.Name] = string(b)
	}
	if !strings.Contains(files["status.json"], `"status": "Idle"`) || !strings.Contains(files["status.json"], `"daemonVersion": "1.2.3"`) {
		t.Errorf("status.json = %s", files["status.json"])
	}
	if !strings.Contains(files["config.json"], `"private_key": "(redacted)"`) {
		t.Errorf("config.json = %s", files["config.json"])
	}
	for name, f := range files {
		if strings.Contains(f, cfg.PrivateKey) {
			t.Errorf("%s holds the private key", name)
		}
	}
	if !strings.Contains(files["daemon.log"], "msg=started") || files["goroutines.txt"] == "" {
		t.Errorf("daemon.log = %q, goroutines %d bytes", files["daemon.log"], len(files["goroutines.txt"]))
	}
	// A profile that does not exist is not created by the bundle.
	src = s.bundleSource("absent")
	if _, err := src.Profile(); err == nil {
		t.Error("no error for a missing profile")
	}
	if _, err := os.Stat(s.path("absent")); err == nil {
		t.Error("the bundle created the missing profile")
	}
}
