//go:build unix

package sshserver_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/pkg/sftp"

	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
)

// TestMain lets the test binary stand in for the agent's: started with
// sshserver.SFTPArg (as `netbird __sftp-server` is), it serves SFTP.
func TestMain(m *testing.M) {
	if len(os.Args) == 2 && os.Args[1] == sshserver.SFTPArg {
		if err := sshserver.ServeSFTP(os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestSFTP: an SFTP client over a real SSH connection, logged in as
// nobody, uploads, lists and downloads; the file is nobody's, and what
// nobody may not write or read is refused, the server running as that
// user and not as the agent's root.
func TestSFTP(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("serving another user needs an agent running as root")
	}
	u, err := user.Lookup("nobody")
	if err != nil {
		t.Fatalf("the test logs in as nobody: %v", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)

	// The test binary in a place nobody may run it from (go test's own
	// build directory is root's alone).
	dir := worldDir(t, 0, 0)
	bin := filepath.Join(dir, "agent")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	copyFile(t, bin, self)
	// nobody's shell is nologin; this passwd file gives it one.
	passwd := filepath.Join(dir, "passwd")
	if err := os.WriteFile(passwd, []byte(fmt.Sprintf("nobody:x:%d:%d:nobody:%s:/bin/sh\n", uid, gid, u.HomeDir)), 0o644); err != nil {
		t.Fatal(err)
	}
	mine, locked := worldDir(t, uid, gid), worldDir(t, 0, 0)

	r := newRigWith(t, func(o *sshserver.Options) {
		o.SFTPCommand = []string{bin, sshserver.SFTPArg}
		o.SFTPServers = []string{} // no OpenSSH fallback: pkg/sftp must serve
		o.Passwd, o.Shadow = passwd, filepath.Join(dir, "no-shadow")
	})
	r.user = "nobody"
	c := r.dial(t)
	sc, err := sftp.NewClient(c)
	if err != nil {
		t.Fatalf("sftp subsystem: %v", err)
	}
	defer sc.Close()

	// The working directory is the user's home, or / when it does not
	// exist, as for commands.
	want := u.HomeDir
	if st, err := os.Stat(want); err != nil || !st.IsDir() {
		want = "/"
	}
	if wd, err := sc.Getwd(); err != nil || wd != want {
		t.Errorf("working directory %q, %v; want %q", wd, err, want)
	}

	payload := bytes.Repeat([]byte("wiremesh sftp "), 20<<10)
	up := filepath.Join(mine, "up.bin")
	f, err := sc.Create(up)
	if err != nil {
		t.Fatalf("upload: %v", err)
	}
	if _, err := f.Write(payload); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("upload: %v", err)
	}

	list, err := sc.ReadDir(mine)
	if err != nil {
		t.Fatalf("list: %v", err)
	}
	if i := slices.IndexFunc(list, func(fi os.FileInfo) bool { return fi.Name() == "up.bin" }); i < 0 || list[i].Size() != int64(len(payload)) {
		t.Errorf("list of %s: %v", mine, names(list))
	}

	rf, err := sc.Open(up)
	if err != nil {
		t.Fatalf("download: %v", err)
	}
	got, err := io.ReadAll(rf)
	rf.Close()
	if err != nil || !bytes.Equal(got, payload) {
		t.Errorf("download: %d of %d bytes, %v", len(got), len(payload), err)
	}

	st, err := os.Stat(up)
	if err != nil {
		t.Fatal(err)
	}
	if sys := st.Sys().(*syscall.Stat_t); int(sys.Uid) != uid || int(sys.Gid) != gid {
		t.Errorf("uploaded file owned by %d:%d, want nobody %d:%d", sys.Uid, sys.Gid, uid, gid)
	}

	// root's directory and root's files stay closed to nobody.
	if _, err := sc.Create(filepath.Join(locked, "x")); !denied(err) {
		t.Errorf("upload into root's %s: %v, want permission denied", locked, err)
	}
	if _, err := os.Lstat(filepath.Join(locked, "x")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused upload left a file: %v", err)
	}
	if rf, err := sc.Open("/etc/shadow"); !denied(err) {
		if err == nil {
			rf.Close()
		}
		t.Errorf("reading /etc/shadow: %v, want permission denied", err)
	}
}

// TestSFTPUnavailable: without the agent's binary and without OpenSSH's
// sftp-server the subsystem is refused, nothing runs, and the peer's log
// says why.
func TestSFTPUnavailable(t *testing.T) {
	var logs syncBuf
	r := newRigWith(t, func(o *sshserver.Options) {
		o.SFTPServers = []string{"/nonexistent/sftp-server"}
		o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	c := r.dial(t)
	if sc, err := sftp.NewClient(c); err == nil {
		sc.Close()
		t.Fatal("sftp subsystem accepted with no SFTP server")
	}
	if l := logs.String(); !strings.Contains(l, "SFTP not started") || !strings.Contains(l, "sftp-server is not installed") {
		t.Errorf("log does not say why SFTP failed:\n%s", l)
	}
	// The connection still serves commands.
	if code, out, _ := run(t, c, sshclient.Session{Command: "echo ok"}); code != 0 || out != "ok\n" {
		t.Errorf("command after refused sftp: code %d, %q", code, out)
	}
}

// denied reports whether the server answered SSH_FX_PERMISSION_DENIED
// (which the client turns into os.ErrPermission).
func denied(err error) bool {
	var se *sftp.StatusError
	return errors.Is(err, os.ErrPermission) || errors.As(err, &se) && se.FxCode() == sftp.ErrSSHFxPermissionDenied
}

func names(list []os.FileInfo) []string {
	var out []string
	for _, fi := range list {
		out = append(out, fmt.Sprintf("%s(%d)", fi.Name(), fi.Size()))
	}
	return out
}

// worldDir is a new directory owned by uid:gid that anyone may enter and
// list, removed with the test.
func worldDir(t *testing.T, uid, gid int) string {
	t.Helper()
	d, err := os.MkdirTemp("", "wiremesh-sftp-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(d) })
	if err := os.Chmod(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(d, uid, gid); err != nil {
		t.Fatal(err)
	}
	return d
}

func copyFile(t *testing.T, dst, src string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o755); err != nil {
		t.Fatal(err)
	}
}
