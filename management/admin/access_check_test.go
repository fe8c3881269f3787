package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/wiremesh/wiremesh/management/store"
)

// helperArgsEnv makes the test binary run the admin command with these
// (JSON) arguments instead of the tests: the permission test runs it as
// another user.
const helperArgsEnv = "WIREMESH_ADMIN_HELPER_ARGS"

func TestMain(m *testing.M) {
	if raw := os.Getenv(helperArgsEnv); raw != "" {
		var args []string
		if err := json.Unmarshal([]byte(raw), &args); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		cmd := Command("/nonexistent")
		cmd.SetArgs(args)
		cmd.SilenceUsage = true
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestExplainOpen(t *testing.T) {
	denied := &fs.PathError{Op: "open", Path: "/var/lib/netbird-server/store.db", Err: syscall.EACCES}
	err := explainOpen("/var/lib/netbird-server/store.db", denied)
	want := "cannot open /var/lib/netbird-server/store.db: permission denied (run as the user that owns the data directory, e.g. sudo)"
	if !strings.HasPrefix(err.Error(), want) || !errors.Is(err, fs.ErrPermission) {
		t.Errorf("permission error: %v", err)
	}
	// The volume of the root-run 0.1.0 image under the unprivileged image:
	// the chown that fixes it, for this user.
	if chown := fmt.Sprintf("chown -R %d:%d /var/lib/netbird-server", os.Geteuid(), os.Getegid()); !strings.Contains(err.Error(), chown) {
		t.Errorf("permission error %q does not name %q", err, chown)
	}
	other := explainOpen("/d/store.db", &fs.PathError{Op: "open", Path: "/d/store.db", Err: syscall.EISDIR})
	if strings.Contains(other.Error(), "sudo") || !errors.Is(other, syscall.EISDIR) {
		t.Errorf("other error: %v", other)
	}
	// A readable, writable data directory (and one not created yet) pass.
	dir := t.TempDir()
	if err := CheckDataDir(store.Config{Engine: store.SQLite, DataDir: dir}); err != nil {
		t.Errorf("own directory: %v", err)
	}
	if err := CheckDataDir(store.Config{Engine: store.SQLite, DataDir: filepath.Join(dir, "new")}); err != nil {
		t.Errorf("directory not created yet: %v", err)
	}
}

// TestAdminPermissionDenied runs `admin setup-keys list` as a user who may
// not open the store (nobody, when the tests run as root): the error names
// the file and says what to do.
func TestAdminPermissionDenied(t *testing.T) {
	base := t.TempDir()
	// The test's temporary directories are private; nobody must reach
	// into them as far as the test wants.
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	bin := filepath.Join(base, "admin.test")
	copyFile(t, bin, 0o755)

	st, err := store.Open(context.Background(), store.Config{Engine: store.SQLite, DataDir: filepath.Join(base, "data")})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	data := filepath.Join(base, "data")

	for _, tc := range []struct {
		name          string
		dirMode, mode os.FileMode
	}{
		{"store file not writable", 0o755, 0o644},
		{"directory closed", 0o700, 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.Chmod(data, tc.dirMode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Join(data, store.FileName), tc.mode); err != nil {
				t.Fatal(err)
			}
			args, _ := json.Marshal([]string{"--datadir", data, "setup-keys", "list"})
			cmd := exec.Command(bin, "-test.run=^$")
			cmd.Env = append(os.Environ(), helperArgsEnv+"="+string(args))
			if os.Geteuid() == 0 {
				cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
			}
			out, err := cmd.CombinedOutput()
			want := "cannot open " + filepath.Join(data, store.FileName) + ": permission denied (run as the user that owns the data directory, e.g. sudo)"
			if err == nil || !strings.Contains(string(out), want) {
				t.Fatalf("admin as another user: %v\n%s\nwant %q", err, out, want)
			}
			if strings.Contains(string(out), "unable to open database file") {
				t.Errorf("SQLite's own message shown: %s", out)
			}
		})
	}
	// The owner (this process) still gets in.
	if err := os.Chmod(data, 0o700); err != nil {
		t.Fatal(err)
	}
	if out, err := run(t, store.Config{Engine: store.SQLite, DataDir: data}, "setup-keys", "list"); err != nil {
		t.Fatalf("as the owner: %v\n%s", err, out)
	}
}

// copyFile copies this test binary to dst, where another user may run it.
func copyFile(t *testing.T, dst string, mode os.FileMode) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(self)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}
