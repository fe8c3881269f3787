package netlab

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ResolvedBin is where scripts/deps.sh extracts systemd-resolved, relative
// to the repository root (never installed on the host, whose resolv.conf
// the package would take over).
const ResolvedBin = ".cache/resolved/root/lib/systemd/systemd-resolved"

// resolvedUID is the systemd-resolve user's ID in the namespace's passwd:
// resolved drops privileges to it, and the host lacks the user.
const resolvedUID = 64990

// BusConf is a system bus configuration for a private dbus-daemon
// listening on path that lets anything talk to anything: a lab's bus
// only carries the test's own services.
func BusConf(path string) string {
	return `<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN" "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=` + path + `</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/><allow own="*"/><allow send_destination="*"/><allow receive_sender="*"/>
  </policy>
</busconfig>
`
}

// Resolved is a real systemd-resolved with its own private system bus,
// serving one lab namespace: its stub listens on 127.0.0.53 there, its
// global upstream is the one the lab starts it with, and its bus socket
// lives in a directory of its own, which every program that should see
// this resolved (the agent's daemon, resolvectl) is pointed at with
// DBUS_SYSTEM_BUS_ADDRESS (Env). Nothing of the host changes: resolved
// and its bus run in a mount namespace of their own with a private /run.
type Resolved struct {
	l   *Lab
	bin string
	// Dir holds the bus socket and the files resolved's namespace sees.
	Dir string
	// Bus is the bus's address (unix:path=...).
	Bus  string
	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  bytes.Buffer
}

// NewResolved prepares (does not start) a resolved for this lab: the bus
// address is known before the namespace exists, so an agent started with
// Env in its environment finds it once it runs. bin is the resolved
// binary (ResolvedBin under the repository root).
func (l *Lab) NewResolved(bin string) *Resolved {
	l.t.Helper()
	// Not t.TempDir: resolved drops privileges before it connects to the
	// bus, and a test's temporary directories are root's alone.
	dir, err := os.MkdirTemp("", "netlab-resolved-")
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		l.t.Fatal(err)
	}
	return &Resolved{l: l, bin: bin, Dir: dir, Bus: "unix:path=" + filepath.Join(dir, "bus")}
}

// Env is the environment entry that points a program at this resolved's bus.
func (r *Resolved) Env() string { return "DBUS_SYSTEM_BUS_ADDRESS=" + r.Bus }

// Start runs the bus and resolved in namespace ns with upstream as the
// global DNS server (no fallback servers: nothing may leave the lab) and
// no cache, so what the tests see is what the link's servers answer now.
// It returns once resolved owns its bus name.
func (r *Resolved) Start(ns string, upstream netip.Addr) {
	l := r.l
	l.t.Helper()
	write := func(name, s string) string {
		p := filepath.Join(r.Dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			l.t.Fatal(err)
		}
		return p
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	group, _ := os.ReadFile("/etc/group")
	pw := write("passwd", string(passwd)+fmt.Sprintf("systemd-resolve:x:%d:%d::/:/usr/sbin/nologin\n", resolvedUID, resolvedUID))
	gr := write("group", string(group)+fmt.Sprintf("systemd-resolve:x:%d:\n", resolvedUID))
	bc := write("bus.conf", BusConf(filepath.Join(r.Dir, "bus")))
	conf := write("resolved.conf", "[Resolve]\nDNS="+upstream.String()+"\nFallbackDNS=\nDNSSEC=no\nDNSOverTLS=no\nLLMNR=no\nMulticastDNS=no\nCache=no\nDNSStubListener=yes\n")
	sock := filepath.Join(r.Dir, "bus")
	script := fmt.Sprintf(`set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mkdir -p /run/systemd/resolved.conf.d
cp %[1]s /run/systemd/resolved.conf.d/netlab.conf
mount --bind %[2]s /etc/passwd
mount --bind %[3]s /etc/group
export %[4]s
dbus-daemon --config-file=%[5]s --nofork --nopidfile &
for i in $(seq 50); do [ -S %[6]s ] && break; sleep 0.1; done
exec %[7]s
`, conf, pw, gr, r.Env(), bc, sock, r.bin)
	r.cmd = l.Cmd(ns, "unshare", "-m", "--fork", "sh", "-c", script)
	r.cmd.Stdout, r.cmd.Stderr = (*lockedWriter)(r), (*lockedWriter)(r)
	r.cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=debug")
	// Its own process group: Stop ends the bus with it.
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		l.t.Fatalf("start resolved: %v", err)
	}
	r.done = make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	l.t.Cleanup(r.Stop)
	deadline := time.Now().Add(15 * time.Second)
	for {
		out, err := r.Ctl(ns, "status")
		if err == nil {
			return
		}
		select {
		case <-r.done:
			l.t.Fatalf("resolved exited:\n%s", r.Output())
		default:
		}
		if time.Now().After(deadline) {
			l.t.Fatalf("resolved does not answer on its bus: %v\n%s\n%s", err, out, r.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Ctl runs resolvectl (beside the binary) in ns against this resolved.
func (r *Resolved) Ctl(ns string, args ...string) (string, error) {
	ctl := filepath.Join(filepath.Dir(r.bin), "../../usr/bin/resolvectl")
	cmd := r.l.Cmd(ns, append([]string{ctl, "--no-pager"}, args...)...)
	cmd.Env = append(os.Environ(), r.Env(), "SYSTEMD_COLORS=0")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Output is what resolved and its bus printed so far.
func (r *Resolved) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return strings.TrimSpace(r.out.String())
}

// Stop ends resolved and its bus (their whole process group).
func (r *Resolved) Stop() {
	if r.cmd == nil || r.cmd.Process == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
}

type lockedWriter Resolved

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.out.Write(p)
}
