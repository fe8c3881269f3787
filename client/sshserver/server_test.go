package sshserver_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/key"
)

func signer(t *testing.T) ssh.Signer {
	t.Helper()
	k, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := sshserver.HostKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type rig struct {
	srv          *sshserver.Server
	addr         string
	host, client ssh.Signer
	local        netip.Addr
	user         string
}

// newRig serves on loopback, the client being the map peer at 127.0.0.1
// with a policy for tcp/22, and logging in as the test's own user.
func newRig(t *testing.T) *rig {
	return newRigWith(t, func(*sshserver.Options) {})
}

// newRigWith is newRig with options changed by edit (loopback being the
// overlay unless edit says otherwise).
func newRigWith(t *testing.T, edit func(*sshserver.Options)) *rig {
	t.Helper()
	r := &rig{host: signer(t), client: signer(t), local: netip.MustParseAddr("127.0.0.1"), user: currentUser(t)}
	o := sshserver.Options{HostKey: r.host, AllowRoot: os.Getuid() == 0, Overlay: netip.MustParsePrefix("127.0.0.0/8")}
	edit(&o)
	r.srv = sshserver.New(o)
	r.allow(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.srv.Serve(ln)
	t.Cleanup(func() {
		r.srv.Close()
		// Every goroutine of the server (and of the test's clients,
		// closed before) ends with Close.
		var left string
		for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if left = sshGoroutines(); left == "" {
				return
			}
		}
		t.Errorf("goroutines left after Close:\n%s", left)
	})
	return r
}

// sshGoroutines is the stacks of live goroutines in the server package
// or the SSH library.
func sshGoroutines() string {
	buf := make([]byte, 1<<20)
	var out []string
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		if strings.Contains(g, "client/sshserver.") && !strings.Contains(g, "sshserver_test.") || strings.Contains(g, "x/crypto/ssh.") {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// syncBuf is a buffer written by the SSH library's copier while the test
// reads it.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) { s.mu.Lock(); defer s.mu.Unlock(); return s.b.Write(p) }
func (s *syncBuf) String() string              { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

func currentUser(t *testing.T) string {
	if u := os.Getenv("USER"); u != "" && os.Getuid() != 0 {
		return u
	}
	if os.Getuid() == 0 {
		return "root"
	}
	t.Skip("cannot tell the current user")
	return ""
}

func (r *rig) allow(policy bool) {
	a := &sshserver.Access{Peers: []sshserver.Peer{{Name: "a.mesh", IP: r.local, Key: r.client.PublicKey()}}}
	if policy {
		a.Rules = []acl.Rule{{Peer: r.local, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}}
	}
	r.srv.SetAccess(a)
}

func (r *rig) dial(t *testing.T) *ssh.Client {
	t.Helper()
	c, err := sshclient.Dial(context.Background(), r.addr, r.user, r.client, r.host.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func run(t *testing.T, c *ssh.Client, o sshclient.Session) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	o.Stdin, o.Stdout, o.Stderr = strings.NewReader(""), &out, &errb
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code, err := sshclient.Run(ctx, c, o)
	if err != nil {
		t.Fatal(err)
	}
	return code, out.String(), errb.String()
}

// TestSessions: commands with their output, exit code and environment,
// a PTY, a signal and a local forward, each over a real SSH connection.
func TestSessions(t *testing.T) {
	r := newRigWith(t, func(o *sshserver.Options) { o.AllowLocalForwarding = true })
	c := r.dial(t)

	code, out, errs := run(t, c, sshclient.Session{Command: "echo out; echo err >&2; exit 3"})
	if code != 3 || out != "out\n" || errs != "err\n" {
		t.Errorf("exec: code %d stdout %q stderr %q", code, out, errs)
	}
	code, out, _ = run(t, c, sshclient.Session{Command: `echo "$LANG:$FOO:$LD_PRELOAD:$USER"`, Env: map[string]string{"FOO": "bar", "LD_PRELOAD": "/evil.so", "LANG": "C.UTF-8"}})
	if code != 0 || out != "C.UTF-8:::"+r.user+"\n" {
		t.Errorf("env: code %d stdout %q", code, out)
	}
	code, out, _ = run(t, c, sshclient.Session{Command: "tty", PTY: true})
	if code != 0 || !regexp.MustCompile(`^/dev/pts/\d+\r?\n$`).MatchString(out) {
		t.Errorf("pty: code %d stdout %q", code, out)
	}
	code, _, _ = run(t, c, sshclient.Session{Command: "tty"})
	if code == 0 {
		t.Errorf("tty without a PTY succeeded")
	}

	// A signal reaches the command.
	s, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var sout syncBuf
	s.Stdout = &sout
	if err := s.Start("trap 'echo got-int; exit 42' INT; echo ready; while :; do sleep 0.05; done"); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100 && !strings.Contains(sout.String(), "ready"); i++ {
		time.Sleep(20 * time.Millisecond)
	}
	if err := s.Signal(ssh.SIGINT); err != nil {
		t.Fatal(err)
	}
	var ee *ssh.ExitError
	if err := s.Wait(); !errors.As(err, &ee) || ee.ExitStatus() != 42 {
		t.Errorf("signal: %v, output %q", err, sout.String())
	}

	// A local forward carries a TCP stream both ways.
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() {
		ec, err := echo.Accept()
		if err != nil {
			return
		}
		_, _ = io.Copy(ec, ec)
		ec.Close()
	}()
	fc, err := c.Dial("tcp", echo.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	payload := bytes.Repeat([]byte("wiremesh"), 64<<10)
	go func() { _, _ = fc.Write(payload); _ = fc.(interface{ CloseWrite() error }).CloseWrite() }()
	got, err := io.ReadAll(fc)
	fc.Close()
	if err != nil || !bytes.Equal(got, payload) {
		t.Errorf("forward: %d of %d bytes back, %v", len(got), len(payload), err)
	}
}

// TestRefusals: a forged host key, an unknown key, a peer without a
// policy, a revoked policy and a disabled user are refused with a clear
// message, and nothing runs.
func TestRefusals(t *testing.T) {
	r := newRig(t)
	ctx := context.Background()

	if _, err := sshclient.Dial(ctx, r.addr, r.user, r.client, signer(t).PublicKey()); !errors.Is(err, sshclient.ErrHostKey) {
		t.Errorf("forged host key: %v", err)
	}
	if _, err := sshclient.Dial(ctx, r.addr, r.user, signer(t), r.host.PublicKey()); err == nil || !strings.Contains(err.Error(), "unable to authenticate") {
		t.Errorf("unknown key: %v", err)
	}
	c := r.dial(t) // logged in while allowed
	marker := t.TempDir() + "/ran"
	r.allow(false)
	if _, err := sshclient.Dial(ctx, r.addr, r.user, r.client, r.host.PublicKey()); err == nil {
		t.Errorf("no policy: login accepted")
	}
	if _, err := c.NewSession(); err == nil {
		t.Errorf("revoked policy, session on an open connection: %v", err)
	}
	r.allow(true)
	c2 := r.dial(t)
	// The user is checked at login: no channel of any kind opens for a
	// user no session may run as.
	for _, u := range []string{"nobody", "no-such-user-wm"} {
		cu, err := sshclient.Dial(ctx, r.addr, u, r.client, r.host.PublicKey())
		if err == nil {
			cu.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "login refused") {
			t.Errorf("user %s: %v", u, err)
		}
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("a refused session ran something")
	}
	code, out, _ := run(t, c2, sshclient.Session{Command: "echo ok"})
	if code != 0 || out != "ok\n" {
		t.Errorf("after allowing again: %d %q", code, out)
	}
}
