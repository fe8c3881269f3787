// Package sshclient is the client side of `netbird ssh`: it connects to a
// peer's SSH server with the agent's own key and accepts only the host key
// the network map gives for that peer, so there is no trust-on-first-use
// prompt and a server showing another key is refused.
package sshclient

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"
)

// ErrHostKey is a server whose host key is not the one the map gives.
var ErrHostKey = errors.New("host key mismatch")

// HostKeyError is ErrHostKey with the key the server presented, for the
// audit report (netbird ssh tells its daemon).
type HostKeyError struct {
	Addr                string
	Presented, Expected ssh.PublicKey
	// ServerVersion is the identification line the server sent (without
	// CR LF; the server's bytes, so untrusted): netbird ssh tells a
	// mesh agent's server (MeshServer) from another SSH server on the
	// same port.
	ServerVersion string
}

func (e *HostKeyError) Error() string {
	return fmt.Sprintf("%v: %s presented %s, the network map says %s: someone may be intercepting the connection",
		ErrHostKey, e.Addr, ssh.FingerprintSHA256(e.Presented), ssh.FingerprintSHA256(e.Expected))
}

func (e *HostKeyError) Unwrap() error { return ErrHostKey }

// Dial connects to addr and logs in as user with signer, accepting only
// hostKey.
func Dial(ctx context.Context, addr, user string, signer ssh.Signer, hostKey ssh.PublicKey) (*ssh.Client, error) {
	return DialWithToken(ctx, addr, user, signer, hostKey, nil)
}

// DialWithToken is Dial that, when the server refuses the key but takes a
// password, logs in with the token token returns (NetBird's JWT check:
// its agents' servers take only a token of the account's identity
// provider). token is called only then, so no login is asked for when
// the key is enough; nil means no token.
func DialWithToken(ctx context.Context, addr, user string, signer ssh.Signer, hostKey ssh.PublicKey, token func(context.Context) (string, error)) (*ssh.Client, error) {
	if hostKey == nil {
		return nil, fmt.Errorf("no SSH host key for %s in the network map (is SSH enabled on that peer?)", addr)
	}
	var banner string
	// The host key callback and the password callback read the server's
	// version line from vc (set before the handshake starts).
	var vc *versionConn
	cfg := &ssh.ClientConfig{
		User: user,
		Auth: []ssh.AuthMethod{ssh.PublicKeys(signer)},
		HostKeyCallback: func(_ string, _ net.Addr, k ssh.PublicKey) error {
			if !bytes.Equal(k.Marshal(), hostKey.Marshal()) {
				return &HostKeyError{Addr: addr, Presented: k, Expected: hostKey, ServerVersion: vc.version()}
			}
			return nil
		},
		HostKeyAlgorithms: []string{hostKey.Type()},
		Timeout:           15 * time.Second,
		// The server says why it refuses a login (no such user, root
		// disabled, locked account) in a banner.
		BannerCallback: func(m string) error { banner = strings.TrimSpace(m); return nil },
	}
	if token != nil {
		cfg.Auth = append(cfg.Auth, ssh.PasswordCallback(func() (string, error) {
			// Our agents' servers take a token only from peers without a
			// key: one that refused our key would refuse the token too,
			// so no one is asked to log in for nothing.
			if strings.Contains(vc.version(), "wiremesh") {
				return "", errOwnKeyRefused
			}
			return token(ctx)
		}))
	}
	d := net.Dialer{Timeout: 15 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	stop := context.AfterFunc(ctx, func() { _ = c.Close() })
	defer stop()
	vc = &versionConn{Conn: c}
	sc, chans, reqs, err := ssh.NewClientConn(vc, addr, cfg)
	if err != nil {
		_ = c.Close()
		if banner != "" {
			return nil, fmt.Errorf("%s: %w", banner, err)
		}
		return nil, err
	}
	return ssh.NewClient(sc, chans, reqs), nil
}

// Session is how to run one session.
type Session struct {
	Command string // "" for a shell
	// PTY asks for a terminal; nil Stdin/Stdout default to the process's.
	PTY            bool
	Term           string
	Env            map[string]string
	Stdin          io.Reader
	Stdout, Stderr io.Writer
}

// Run runs one session on c and returns the remote exit code (-1 when
// the command was killed by a signal or the connection ended without an
// exit status).
func Run(ctx context.Context, c *ssh.Client, o Session) (int, error) {
	s, err := c.NewSession()
	if err != nil {
		return -1, fmt.Errorf("opening a session: %w", err)
	}
	defer s.Close()
	for k, v := range o.Env {
		_ = s.Setenv(k, v) // a server that refuses a variable still runs the session
	}
	s.Stdin, s.Stdout, s.Stderr = o.Stdin, o.Stdout, o.Stderr
	if o.PTY {
		cols, rows := 80, 24
		if f, ok := o.Stdout.(*os.File); ok {
			if sz, err := pty.GetsizeFull(f); err == nil && sz.Cols > 0 && sz.Rows > 0 {
				cols, rows = int(sz.Cols), int(sz.Rows)
			}
		}
		t := o.Term
		if t == "" {
			t = "xterm-256color"
		}
		if err := s.RequestPty(t, rows, cols, ssh.TerminalModes{ssh.ECHO: 1}); err != nil {
			return -1, fmt.Errorf("requesting a terminal: %w", err)
		}
	}
	if o.Command == "" {
		err = s.Shell()
	} else {
		err = s.Start(o.Command)
	}
	if err != nil {
		return -1, fmt.Errorf("starting: %w", err)
	}
	// Interrupts while a command runs without a terminal go to it.
	sigs := make(chan os.Signal, 1)
	if !o.PTY {
		signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	}
	done := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); done <- s.Wait() }()
	defer func() { signal.Stop(sigs); wg.Wait() }()
	for {
		select {
		case err := <-done:
			return exitCode(err)
		case sig := <-sigs:
			name := map[os.Signal]ssh.Signal{syscall.SIGINT: ssh.SIGINT, syscall.SIGTERM: ssh.SIGTERM}[sig]
			_ = s.Signal(name)
		case <-ctx.Done():
			_ = s.Close()
			<-done
			return -1, ctx.Err()
		}
	}
}

func exitCode(err error) (int, error) {
	if err == nil {
		return 0, nil
	}
	var ee *ssh.ExitError
	if errors.As(err, &ee) {
		if ee.Signal() != "" {
			return 128 + signalNumber(ee.Signal()), nil
		}
		return ee.ExitStatus(), nil
	}
	var me *ssh.ExitMissingError
	if errors.As(err, &me) {
		return -1, errors.New("the session ended without an exit status")
	}
	return -1, err
}

// Forward is one -L forward: connections to Listen are carried to
// Target, dialed by the server.
type Forward struct{ Listen, Target string }

// ParseForward parses -L's [bind_address:]port:host:hostport.
func ParseForward(s string) (Forward, error) {
	parts := splitForward(s)
	switch len(parts) {
	case 3:
		return Forward{Listen: net.JoinHostPort("127.0.0.1", parts[0]), Target: net.JoinHostPort(parts[1], parts[2])}, checkPorts(s, parts[0], parts[2])
	case 4:
		return Forward{Listen: net.JoinHostPort(parts[0], parts[1]), Target: net.JoinHostPort(parts[2], parts[3])}, checkPorts(s, parts[1], parts[3])
	}
	return Forward{}, fmt.Errorf("-L %q: want [bind_address:]port:host:hostport", s)
}

func checkPorts(s string, ports ...string) error {
	for _, p := range ports {
		if n, err := strconv.Atoi(p); err != nil || n < 0 || n > 65535 {
			return fmt.Errorf("-L/-R %q: bad port %q", s, p)
		}
	}
	return nil
}

// splitForward splits on colons outside [IPv6] brackets.
func splitForward(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, c := range s {
		switch c {
		case '[':
			depth++
		case ']':
			depth--
		case ':':
			if depth == 0 {
				out = append(out, trimBrackets(s[start:i]))
				start = i + 1
			}
		}
	}
	return append(out, trimBrackets(s[start:]))
}

func trimBrackets(s string) string {
	if len(s) >= 2 && s[0] == '[' && s[len(s)-1] == ']' {
		return s[1 : len(s)-1]
	}
	return s
}

// LocalForward listens on f.Listen and carries each connection through c
// to f.Target until ctx ends.
func LocalForward(ctx context.Context, c *ssh.Client, f Forward) error {
	ln, err := net.Listen("tcp", f.Listen)
	if err != nil {
		return fmt.Errorf("-L %s: %w", f.Listen, err)
	}
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer func() { stop(); _ = ln.Close(); wg.Wait() }()
	for {
		lc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			rc, err := c.Dial("tcp", f.Target)
			if err != nil {
				_ = lc.Close()
				return
			}
			pipe(lc, rc)
		}()
	}
}

// RemoteForward asks the server to listen on f.Listen and carries each
// connection to f.Target, dialed here, until ctx ends.
func RemoteForward(ctx context.Context, c *ssh.Client, f Forward) error {
	ln, err := c.Listen("tcp", f.Listen)
	if err != nil {
		return fmt.Errorf("-R %s: %w", f.Listen, err)
	}
	var wg sync.WaitGroup
	stop := context.AfterFunc(ctx, func() { _ = ln.Close() })
	defer func() { stop(); _ = ln.Close(); wg.Wait() }()
	for {
		rc, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var d net.Dialer
			lc, err := d.DialContext(ctx, "tcp", f.Target)
			if err != nil {
				_ = rc.Close()
				return
			}
			pipe(lc, rc)
		}()
	}
}

func pipe(a, b net.Conn) {
	var wg sync.WaitGroup
	wg.Add(2)
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
	}
	go half(a, b)
	go half(b, a)
	wg.Wait()
	_ = a.Close()
	_ = b.Close()
}

// errOwnKeyRefused: one of our agents refused this peer's key.
var errOwnKeyRefused = errors.New("the peer refused this peer's SSH key")

// versionConn keeps the server's version line (the first line it sends)
// for the authentication callbacks, which the SSH library gives no
// connection metadata.
type versionConn struct {
	net.Conn
	mu   sync.Mutex
	line []byte
	done bool
}

func (v *versionConn) Read(p []byte) (int, error) {
	n, err := v.Conn.Read(p)
	v.mu.Lock()
	if !v.done {
		b := p[:n]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b, v.done = b[:i], true
		}
		if len(v.line)+len(b) > 255 { // RFC 4253: at most 255 bytes
			b, v.done = b[:max(0, 255-len(v.line))], true
		}
		v.line = append(v.line, b...)
	}
	v.mu.Unlock()
	return n, err
}

func (v *versionConn) version() string {
	v.mu.Lock()
	defer v.mu.Unlock()
	return strings.TrimSuffix(string(v.line), "\r")
}
