package proctest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// A build directory is removed once the test process that made it is gone,
// and kept while it runs.
func TestRemoveStaleBuilds(t *testing.T) {
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	mk := func(pid int) string {
		d, err := os.MkdirTemp("", fmt.Sprintf("%s%d-", buildPrefix, pid))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(d) })
		if err := os.WriteFile(filepath.Join(d, "netbird"), []byte("x"), 0o755); err != nil {
			t.Fatal(err)
		}
		return d
	}
	gone, alive := mk(dead.Process.Pid), mk(os.Getpid())
	removeStaleBuilds()
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("build directory of exited pid %d still there (%v)", dead.Process.Pid, err)
	}
	if _, err := os.Stat(alive); err != nil {
		t.Errorf("build directory of this running process removed: %v", err)
	}
}
