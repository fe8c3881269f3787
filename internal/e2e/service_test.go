package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/proctest"
)

// TestServiceInstall registers the daemon with this machine's init system
// (SysV here: PID 1 is not systemd), checks the generated definition,
// starts it through the service manager, talks to the daemon it started,
// and removes it again.
func TestServiceInstall(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("installing a service needs root")
	}
	if _, err := exec.LookPath("service"); err != nil {
		t.Skip("no `service` command (SysV init tools) on this machine")
	}
	if _, err := os.Stat("/etc/init.d"); err != nil {
		t.Skip("no /etc/init.d")
	}
	bin := proctest.Binary(t, "netbird")
	dir := t.TempDir()
	name := fmt.Sprintf("wmtest-%d", os.Getpid())
	sock := "unix://" + filepath.Join(dir, "d.sock")
	logFile := filepath.Join(dir, "daemon.log")
	run := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append([]string{"--daemon-addr", sock, "--log-file", logFile, "--log-level", "debug"}, args...)...)
		cmd.Env = append(os.Environ(), "NB_STATE_DIR="+filepath.Join(dir, "state"))
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		_, _ = run("service", "uninstall", "-s", name)
		_ = os.Remove(filepath.Join("/etc/init.d", name))
	})
	if out, _ := run("service", "status", "-s", name); !strings.Contains(out, "not installed") {
		t.Fatalf("status before install:\n%s", out)
	}
	if out, err := run("service", "install", "-s", name); err != nil {
		t.Fatalf("install: %v\n%s", err, out)
	}
	script, err := os.ReadFile(filepath.Join("/etc/init.d", name))
	if err != nil {
		t.Fatalf("no init script: %v", err)
	}
	for _, want := range []string{bin, `"service" "run"`, sock, logFile, `"debug"`, "NB_STATE_DIR=" + filepath.Join(dir, "state")} {
		if !strings.Contains(string(script), want) {
			t.Errorf("init script lacks %q:\n%s", want, script)
		}
	}
	if out, _ := run("service", "status", "-s", name); !strings.Contains(out, "installed and stopped") {
		t.Fatalf("status after install:\n%s", out)
	}
	if out, err := run("service", "start", "-s", name); err != nil {
		t.Fatalf("start: %v\n%s", err, out)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		out, err := run("status")
		if err == nil && strings.Contains(out, "Daemon status: Idle") {
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(logFile)
			t.Fatalf("the service's daemon does not answer: %v\n%s\nlog:\n%s", err, out, log)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, _ := run("service", "status", "-s", name); !strings.Contains(out, "running") {
		t.Fatalf("status while running:\n%s", out)
	}
	if out, err := run("service", "restart", "-s", name); err != nil {
		t.Fatalf("restart: %v\n%s", err, out)
	}
	if out, err := run("service", "stop", "-s", name); err != nil {
		t.Fatalf("stop: %v\n%s", err, out)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		if _, err := run("status"); err != nil {
			break // the daemon is gone
		}
		if time.Now().After(deadline) {
			t.Fatal("the daemon still answers after service stop")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if out, err := run("service", "uninstall", "-s", name); err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join("/etc/init.d", name)); err == nil {
		t.Fatal("the init script is still there")
	}
}
