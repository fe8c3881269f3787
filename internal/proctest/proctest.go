// Package proctest builds the project's binaries once per test binary and
// runs them as real processes whose output tests can wait on. Every process
// is killed (by PID) in test cleanup, also when the test fails.
package proctest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	buildDir  string
	buildErr  error
)

// Root is the repository root.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// DashboardBuilt reports whether the dashboard's production build
// (dashboard/dist, from `npm run build`) exists: the servers Binary builds
// then embed it (build tag dashboard).
func DashboardBuilt() bool {
	_, err := os.Stat(filepath.Join(Root(), "dashboard", "dist", "index.html"))
	return err == nil
}

// Binary returns the path of a built command (e.g. "netbird-server"),
// building all commands on first use.
func Binary(t testing.TB, name string) string {
	t.Helper()
	buildOnce.Do(func() {
		removeStaleBuilds()
		buildDir, buildErr = os.MkdirTemp("", fmt.Sprintf("%s%d-", buildPrefix, os.Getpid()))
		if buildErr != nil {
			return
		}
		args := []string{"build", "-o", buildDir + "/"}
		if DashboardBuilt() {
			args = append(args, "-tags", "dashboard") // the servers embed it
		}
		cmd := exec.Command("go", append(args, "./cmd/...", "./management/cmd/...", "./signal/cmd/...", "./relay/cmd/...", "./client/cmd/...", "./bench/plainwg", "./internal/testnats/testnatsd")...)
		cmd.Dir = Root()
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	p := filepath.Join(buildDir, name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("binary %s not built: %v", name, err)
	}
	return p
}

// buildPrefix starts the name of each test binary's build directory,
// followed by the PID of the test process that owns it.
const buildPrefix = "wiremesh-bin-pid"

// removeStaleBuilds deletes the build directories of test processes that
// are gone. A test binary cannot remove its own at exit (no hook runs after
// the last test without a TestMain in every package), and each holds every
// binary of the project (~200 MB): left alone, a day of test runs fills
// the disk.
func removeStaleBuilds() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), buildPrefix+"*"))
	for _, d := range dirs {
		rest := strings.TrimPrefix(filepath.Base(d), buildPrefix)
		pid, err := strconv.Atoi(rest[:max(strings.IndexByte(rest, '-'), 0)])
		if err != nil || pid <= 0 {
			continue
		}
		if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
			_ = os.RemoveAll(d)
		}
	}
}

// Proc is a running process.
type Proc struct {
	Cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	cond chan struct{}
	done chan struct{}
}

// Start runs name with args (and extra env) and kills it at cleanup.
func Start(t testing.TB, env []string, name string, args ...string) *Proc {
	t.Helper()
	return StartCmd(t, exec.Command(Binary(t, name), args...), env)
}

// StartCmd runs a prepared command (e.g. wrapped in `ip netns exec`).
func StartCmd(t testing.TB, cmd *exec.Cmd, env []string) *Proc {
	t.Helper()
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &Proc{Cmd: cmd, cond: make(chan struct{}), done: make(chan struct{})}
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", cmd.Path, err)
	}
	pw.Close()
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.Write(sc.Bytes())
			p.out.WriteByte('\n')
			close(p.cond)
			p.cond = make(chan struct{})
			p.mu.Unlock()
		}
		pr.Close()
	}()
	go func() { _ = cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() || os.Getenv("WIREMESH_TEST_LOGS") != "" {
			t.Logf("output of %s:\n%s", filepath.Base(cmd.Path), p.Output())
		}
	})
	return p
}

// Stop sends SIGTERM to the process group, then SIGKILL after 5 s.
func (p *Proc) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Kill sends SIGKILL to the process group (a crash: no cleanup runs) and
// waits for the process to end.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.Cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Exited is closed when the process ends.
func (p *Proc) Exited() <-chan struct{} { return p.done }

// Output is everything printed so far.
func (p *Proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// Wait waits until the output matches re and returns the submatches.
func (p *Proc) Wait(t testing.TB, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.After(timeout)
	for {
		p.mu.Lock()
		m := re.FindStringSubmatch(p.out.String())
		ch := p.cond
		p.mu.Unlock()
		if m != nil {
			return m
		}
		select {
		case <-ch:
		case <-p.done:
			t.Fatalf("%s exited before printing %q:\n%s", filepath.Base(p.Cmd.Path), re, p.Output())
		case <-deadline:
			t.Fatalf("%s did not print %q within %v:\n%s", filepath.Base(p.Cmd.Path), re, timeout, p.Output())
		}
	}
}

// Run runs a command to completion and returns its combined output.
func Run(t testing.TB, name string, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(Binary(t, name), args...).CombinedOutput()
	return string(out), err
}
