package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/client/state"
	"github.com/wiremesh/wiremesh/internal/netlab"
)

// agentSSHKey is the SSH key an agent's profile gives it now: the
// rotated one, else the one derived from its WireGuard key.
func agentSSHKey(t *testing.T, a *Agent) ssh.Signer {
	t.Helper()
	cfg, err := state.Load(filepath.Join(a.Dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := sshserver.AgentKey(cfg.Key(), cfg.RotatedSSHKey())
	if err != nil {
		t.Fatal(err)
	}
	s, err := sshserver.Signer(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sshFrom opens an SSH connection from agent from's namespace (so from
// its overlay address) to addr as root, with signer as the client key,
// accepting only hostKey.
func sshFrom(from *Agent, addr string, signer ssh.Signer, hostKey ssh.PublicKey) (*ssh.Client, error) {
	var c *ssh.Client
	err := netlab.Do(from.NS, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		var err error
		c, err = sshclient.Dial(ctx, addr, "root", signer, hostKey)
		return err
	})
	return c, err
}

// startSleeper runs a session on c whose shell writes its PID to pidFile
// and sleeps; it returns the PID, for the test to see the session's
// process end.
func startSleeper(t *testing.T, c *ssh.Client, pidFile string) int {
	t.Helper()
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(fmt.Sprintf("echo $$ > %s; exec sleep 60", pidFile)); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		b, _ := os.ReadFile(pidFile)
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatal("session never started")
		}
	}
}

// alive reports whether process pid still runs (the test shares the
// agents' PID namespace).
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	return err == nil && !strings.Contains(string(b), ") Z ") // a zombie has ended
}

// refusedAfter polls SSH logins from from to addr with signer until one
// fails and returns when, since t0, the first failing attempt started
// (one into a tunnel that no longer carries it fails only at its
// timeout, but the key was refused from its start on).
func refusedAfter(t *testing.T, t0 time.Time, from *Agent, addr string, signer ssh.Signer, hostKey ssh.PublicKey) (time.Duration, error) {
	t.Helper()
	for time.Since(t0) < 15*time.Second {
		start := time.Now()
		c, err := sshFrom(from, addr, signer, hostKey)
		if err != nil {
			return start.Sub(t0), err
		}
		c.Close()
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s's key still logs in to %s 15 s later", from.Name, addr)
	return 0, nil
}

// within polls ok every 20 ms for at most max and returns how long it
// took, or fails.
func within(t *testing.T, max time.Duration, what string, ok func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !ok() {
		if time.Since(start) > max {
			t.Fatalf("%s: not within %v", what, max)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Since(start)
}

// TestSSHRotate: `netbird ssh rotate-key` on b gives it a new SSH key
// without touching its WireGuard key. Before, b's key (derived from its
// WireGuard key) logs in to a; after, a's map carries the new key: a's
// `netbird ssh b` accepts b's new host key, b's `netbird ssh a` logs in
// with the new client key, a session b opened with the old key is closed
// and the old key is refused within 2 s, and a server on b's address
// still presenting the old host key is detected. Then b is deleted
// through the REST API: its open session on a ends and its key stops
// working within 2 s (measured, printed).
func TestSSHRotate(t *testing.T) {
	m := NewMesh(t)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	url := "http://" + netlab.PubAddr + ":" + mgmtPort
	for _, x := range []*Agent{a, b} {
		if out, err := m.UpAt(x, url, m.Key, "--allow-server-ssh", "--enable-ssh-root"); err != nil || !strings.Contains(out, "Connected") {
			t.Fatalf("%s: up: %v\n%s", x.Name, err, out)
		}
	}
	api := m.OwnerAPI(t)
	ids := map[string]string{}
	for _, n := range []string{"a", "b"} {
		ids[n] = api.IDOf("/api/peers", n)
		api.Call("PUT", "/api/peers/"+ids[n], map[string]any{"name": n, "ssh_enabled": true}, 200)
	}
	// The Default policy lets a and b reach each other on every port.
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	wgB := m.Status(b).PublicKey
	hostA := agentSSHKey(t, a).PublicKey()
	oldB := agentSSHKey(t, b)
	addrA := net.JoinHostPort(ipA, "22")

	// Before: a reaches b, b's (derived) key logs in to a.
	within(t, 30*time.Second, "a -> b before the rotation", func() bool { _, code := m.sshRun(a, "root@b", "true"); return code == 0 })
	var oldConn *ssh.Client
	within(t, 10*time.Second, "b's old key -> a before the rotation", func() bool {
		c, err := sshFrom(b, addrA, oldB, hostA)
		oldConn = c
		return err == nil
	})
	defer oldConn.Close()
	pid := startSleeper(t, oldConn, filepath.Join(t.TempDir(), "old-session.pid"))

	out, err := m.CLI(b, "ssh", "rotate-key")
	if err != nil || !strings.Contains(out, "SSH key rotated") {
		t.Fatalf("rotate-key: %v\n%s", err, out)
	}
	rotated := time.Now()
	newPub := strings.TrimSpace(lastLines(strings.TrimSpace(out), 1))
	newB := agentSSHKey(t, b)
	if got := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(newB.PublicKey()))); got != newPub {
		t.Fatalf("rotate-key printed %q, b's profile holds %q", newPub, got)
	}
	if string(newB.PublicKey().Marshal()) == string(oldB.PublicKey().Marshal()) {
		t.Fatal("the SSH key did not change")
	}
	if got := m.Status(b).PublicKey; got != wgB {
		t.Fatalf("the WireGuard key changed with the SSH key: %s -> %s", wgB, got)
	}
	if fi, err := os.Stat(filepath.Join(b.Dir, "config.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("b's profile mode %v, %v", fi.Mode(), err)
	}

	// a's server ends the session opened with b's old key, and refuses
	// the old key from then on.
	within(t, 10*time.Second, "the old key's session on a ending", func() bool { return !alive(pid) })
	sessionTook := time.Since(rotated)
	refusedTook, err := refusedAfter(t, rotated, b, addrA, oldB, hostA)
	if !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("b's old key -> a after the rotation: %v, want an authentication failure", err)
	}
	t.Logf("rotation: the old key's session ended after %v, the old key refused after %v", sessionTook.Round(time.Millisecond), refusedTook.Round(time.Millisecond))
	if sessionTook > 2*time.Second || refusedTook > 2*time.Second {
		t.Errorf("the old key kept working for %v / %v after the rotation (want within 2 s)", sessionTook, refusedTook)
	}

	// a's map carries the new key: b's server presents it and a's
	// `netbird ssh` accepts it; b logs in to a with it.
	within(t, 10*time.Second, "a's map carrying b's new key", func() bool {
		out, err := m.CLI(a, "ssh", "known-hosts", "b")
		return err == nil && strings.Contains(out, newPub)
	})
	if out, code := m.sshRun(a, "root@b", "echo via-new-host-key"); code != 0 || !strings.Contains(out, "via-new-host-key") {
		t.Errorf("a -> b after the rotation: exit %d\n%s\nb's log:\n%s", code, out, lastLines(b.Daemon.Output(), 30))
	}
	if out, code := m.sshRun(b, "root@a", "echo via-new-client-key"); code != 0 || !strings.Contains(out, "via-new-client-key") {
		t.Errorf("b -> a after the rotation: exit %d\n%s", code, out)
	}
	if c, err := sshFrom(b, addrA, newB, hostA); err != nil {
		t.Errorf("b's new key -> a: %v", err)
	} else {
		c.Close()
	}
	// A server on b's address presenting b's old host key (a stolen old
	// key, or a server that missed the rotation) is refused.
	srv := sshserver.New(sshserver.Options{HostKey: oldB, AllowRoot: true, Overlay: netip.MustParsePrefix("0.0.0.0/0")})
	srv.SetAccess(&sshserver.Access{AllowAll: true})
	t.Cleanup(srv.Close)
	if err := netlab.Do(b.NS, func() error { return srv.Listen(netip.MustParseAddr(ipB), 2222) }); err != nil {
		t.Fatal(err)
	}
	if out, code := m.sshRun(a, "-p", "2222", "root@b", "echo should-not-run"); code == 0 || !strings.Contains(out, "host key mismatch") || strings.Contains(out, "should-not-run") {
		t.Errorf("b's old host key after the rotation: exit %d %q", code, out)
	}

	// b deleted: its session on a ends and its key stops working.
	newConn, err := sshFrom(b, addrA, newB, hostA)
	if err != nil {
		t.Fatal(err)
	}
	defer newConn.Close()
	pid = startSleeper(t, newConn, filepath.Join(t.TempDir(), "deleted-session.pid"))
	api.Call("DELETE", "/api/peers/"+ids["b"], nil, 200)
	deleted := time.Now()
	within(t, 10*time.Second, "the deleted peer's session on a ending", func() bool { return !alive(pid) })
	sessionTook = time.Since(deleted)
	refusedTook, err = refusedAfter(t, deleted, b, addrA, newB, hostA)
	t.Logf("deleted peer -> a: %v", err)
	within(t, 10*time.Second, "b gone from a's map", func() bool {
		_, err := m.CLI(a, "ssh", "known-hosts", "b")
		return err != nil
	})
	t.Logf("peer deleted: its session on a ended after %v, its key refused after %v", sessionTook.Round(time.Millisecond), refusedTook.Round(time.Millisecond))
	if sessionTook > 2*time.Second || refusedTook > 2*time.Second {
		t.Errorf("the deleted peer's key kept working for %v / %v (want within 2 s)", sessionTook, refusedTook)
	}
}
