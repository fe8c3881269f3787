package sshserver_test

import (
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
)

// silentTarget accepts TCP connections and never sends nor closes them
// until the test ends.
func silentTarget(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			held <- c
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		for {
			select {
			case c := <-held:
				c.Close()
			default:
				return
			}
		}
	})
	return ln.Addr().String()
}

// TestForwardingOptIn: without --enable-ssh-*-port-forwarding neither
// ssh -L nor ssh -R does anything, even for a logged-in peer.
func TestForwardingOptIn(t *testing.T) {
	r := newRig(t)
	c := r.dial(t)
	if fc, err := c.Dial("tcp", silentTarget(t)); err == nil || !strings.Contains(err.Error(), "--enable-ssh-local-port-forwarding") {
		if fc != nil {
			fc.Close()
		}
		t.Errorf("local forward with forwarding off: %v", err)
	}
	if ln, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
		ln.Close()
		t.Errorf("remote forward with forwarding off accepted")
	}
}

// TestForwardNeedsValidUser: a peer logging in as a user no session may
// run as (root with root disabled, an unknown user) gets no connection,
// so no forward either.
func TestForwardNeedsValidUser(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("logging in as root needs an agent running as root")
	}
	r := newRigWith(t, func(o *sshserver.Options) {
		o.AllowRoot, o.AllowLocalForwarding, o.AllowRemoteForwarding = false, true, true
	})
	for _, u := range []string{"root", "no-such-user-wm"} {
		c, err := sshclient.Dial(context.Background(), r.addr, u, r.client, r.host.PublicKey())
		if err == nil {
			_, ferr := c.Dial("tcp", silentTarget(t))
			c.Close()
			t.Fatalf("user %s logged in (forward: %v)", u, ferr)
		}
		if !strings.Contains(err.Error(), "login refused") {
			t.Errorf("user %s: %v", u, err)
		}
	}
}

// TestRemoteForwardLimits: -R listens on loopback whatever address the
// client names, and at most 10 per connection.
func TestRemoteForwardLimits(t *testing.T) {
	r := newRigWith(t, func(o *sshserver.Options) { o.AllowRemoteForwarding = true })
	c := r.dial(t)
	ln, err := c.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if pc, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err != nil {
		t.Errorf("forward not on loopback: %v", err)
	} else {
		pc.Close()
	}
	// Not on any other address of the host.
	if ifs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil || p.Addr().IsLoopback() || !p.Addr().Is4() {
				continue
			}
			if pc, err := net.DialTimeout("tcp", netip.AddrPortFrom(p.Addr(), uint16(port)).String(), time.Second); err == nil {
				pc.Close()
				t.Errorf("remote forward reachable on %s", p.Addr())
			}
		}
	}
	lns := []net.Listener{ln}
	for i := 1; i < 10; i++ {
		l, err := c.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("forward %d: %v", i+1, err)
		}
		lns = append(lns, l)
	}
	if l, err := c.Listen("tcp", "127.0.0.1:0"); err == nil {
		l.Close()
		t.Errorf("11th remote forward accepted")
	}
	for _, l := range lns {
		l.Close()
	}
}

// TestCloseWithSilentForward: a -L stream to a target that neither sends
// nor closes ends with its connection, and Close returns promptly (it
// used to hang for good, holding the engine's lock).
func TestCloseWithSilentForward(t *testing.T) {
	r := newRigWith(t, func(o *sshserver.Options) { o.AllowLocalForwarding = true })
	c, err := sshclient.Dial(context.Background(), r.addr, r.user, r.client, r.host.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	fc, err := c.Dial("tcp", silentTarget(t))
	if err != nil {
		t.Fatal(err)
	}
	_, _ = fc.Write([]byte("hello"))
	time.Sleep(100 * time.Millisecond)
	c.Close()
	done := make(chan struct{})
	start := time.Now()
	go func() { r.srv.Close(); close(done) }()
	select {
	case <-done:
		t.Logf("Close took %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(3 * time.Second):
		t.Fatal("Close still blocked after 3 s")
	}
}

// TestRevokeEndsOpen: taking the policy away ends an open session and
// a -R listener at once, not only new ones.
func TestRevokeEndsOpen(t *testing.T) {
	r := newRigWith(t, func(o *sshserver.Options) { o.AllowRemoteForwarding = true })
	c := r.dial(t)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("sleep 30"); err != nil {
		t.Fatal(err)
	}
	ln, err := c.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ended := make(chan error, 1)
	go func() { ended <- s.Wait() }()
	start := time.Now()
	r.allow(false)
	select {
	case err := <-ended:
		t.Logf("session ended %v after the revoke: %v", time.Since(start).Round(time.Millisecond), err)
	case <-time.After(2 * time.Second):
		t.Fatal("session still running 2 s after the policy was revoked")
	}
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		pc, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break
		}
		pc.Close()
		if time.Now().After(deadline) {
			t.Fatal("remote forward still listening after the revoke")
		}
	}
}

// TestPreAuthLimits: sources outside the overlay are dropped before the
// handshake, one source holds at most 4 unauthenticated connections, and
// Close does not wait for handshakes in progress.
func TestPreAuthLimits(t *testing.T) {
	outside := newRigWith(t, func(o *sshserver.Options) { o.Overlay = netip.MustParsePrefix("100.64.0.0/10") })
	if c, err := sshclient.Dial(context.Background(), outside.addr, outside.user, outside.client, outside.host.PublicKey()); err == nil {
		c.Close()
		t.Errorf("login from outside the overlay accepted")
	}
	outside.srv.Close()

	r := newRig(t)
	var raw []net.Conn
	defer func() {
		for _, c := range raw {
			c.Close()
		}
	}()
	for i := 0; i < 4; i++ {
		c, err := net.Dial("tcp", r.addr)
		if err != nil {
			t.Fatal(err)
		}
		raw = append(raw, c)
		// The server's version line: the handshake started.
		_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 8)); err != nil {
			t.Fatalf("connection %d: %v", i+1, err)
		}
	}
	fifth, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	raw = append(raw, fifth)
	_ = fifth.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadAll(fifth); err != nil {
		t.Errorf("5th unauthenticated connection from one source not closed: %v", err)
	}
	start := time.Now()
	r.srv.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Close waited %v for handshakes", d)
	}
}

// TestSessionAndEnvLimits: at most 10 sessions per connection and 64
// environment variables per session.
func TestSessionAndEnvLimits(t *testing.T) {
	r := newRig(t)
	c := r.dial(t)
	var open []*ssh.Session
	defer func() {
		for _, s := range open {
			s.Close()
		}
	}()
	for i := 0; i < 10; i++ {
		s, err := c.NewSession()
		if err != nil {
			t.Fatalf("session %d: %v", i+1, err)
		}
		open = append(open, s)
	}
	if s, err := c.NewSession(); err == nil {
		s.Close()
		t.Errorf("11th session accepted")
	}
	s := open[0]
	var err error
	for i := 0; i < 65 && err == nil; i++ {
		err = s.Setenv("LC_X"+strconv.Itoa(i), "C")
		if i < 64 && err != nil {
			t.Fatalf("variable %d refused: %v", i+1, err)
		}
	}
	if err == nil {
		t.Errorf("65th variable accepted")
	}
	if err := s.Setenv("NODE_OPTIONS", "--require=/tmp/x"); err == nil {
		t.Errorf("NODE_OPTIONS accepted")
	}
}

// TestNoSignalAfterReap: once the command was reaped (its output still
// draining from the PTY), a client's signal goes nowhere: the pid and
// group id may already be someone else's. Here a background child of
// the finished shell must survive a TERM sent after the shell exited.
func TestNoSignalAfterReap(t *testing.T) {
	r := newRig(t)
	c := r.dial(t)
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RequestPty("xterm", 24, 80, ssh.TerminalModes{}); err != nil {
		t.Fatal(err)
	}
	marker := t.TempDir() + "/survived"
	// The child ignores the hangup the shell's exit sends its group.
	if err := s.Start("(trap '' HUP; sleep 1; touch " + marker + ") & sleep 0.1; exit 0"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond) // the shell exited; its child holds the PTY
	if err := s.Signal(ssh.SIGTERM); err != nil {
		t.Fatal(err)
	}
	_ = s.Wait()
	for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(marker); err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the finished command's process group was signalled")
		}
	}
}
