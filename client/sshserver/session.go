//go:build unix

package sshserver

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/crypto/ssh"
)

// session is one "session" channel: at most one shell, command or
// subsystem, with the environment and terminal the client asked for.
type session struct {
	c   *conn
	ch  ssh.Channel
	acc account
	env []string

	envBytes int

	mu      sync.Mutex
	started bool
	reaped  bool // the command was waited for: its pid may be reused
	cmd     *exec.Cmd
	ptyReq  *ptyRequest
	tty     *os.File // the PTY's master side while a PTY command runs
	done    chan struct{}
	// replied is closed once the request that started the command is
	// answered: the exit status must not reach the client before that.
	replied chan struct{}
}

type ptyRequest struct {
	Term          string
	Cols, Rows    uint32
	Width, Height uint32
	Modes         string
}

// signals are the SSH signal names (RFC 4254 6.10) a client may send.
var signals = map[string]syscall.Signal{
	"ABRT": syscall.SIGABRT, "ALRM": syscall.SIGALRM, "FPE": syscall.SIGFPE, "HUP": syscall.SIGHUP,
	"ILL": syscall.SIGILL, "INT": syscall.SIGINT, "KILL": syscall.SIGKILL, "PIPE": syscall.SIGPIPE,
	"QUIT": syscall.SIGQUIT, "SEGV": syscall.SIGSEGV, "TERM": syscall.SIGTERM, "USR1": syscall.SIGUSR1,
	"USR2": syscall.SIGUSR2,
}

// exitSignals are the names a command's death by signal is reported
// with: those a client may send and the other common ones.
var exitSignals = map[syscall.Signal]string{
	syscall.SIGBUS: "BUS", syscall.SIGCHLD: "CHLD", syscall.SIGCONT: "CONT", syscall.SIGSTOP: "STOP",
	syscall.SIGSYS: "SYS", syscall.SIGTRAP: "TRAP", syscall.SIGTSTP: "TSTP", syscall.SIGTTIN: "TTIN",
	syscall.SIGTTOU: "TTOU", syscall.SIGURG: "URG", syscall.SIGVTALRM: "VTALRM", syscall.SIGXCPU: "XCPU",
	syscall.SIGXFSZ: "XFSZ", syscall.SIGPROF: "PROF", syscall.SIGWINCH: "WINCH",
}

// signalName is sig's SSH name; one without a name is reported as
// OpenSSH does ("SIG@openssh.com"), never as another signal.
func signalName(sig syscall.Signal) string {
	for n, s := range signals {
		if s == sig {
			return n
		}
	}
	if n, ok := exitSignals[sig]; ok {
		return n
	}
	return "SIG@openssh.com"
}

// Limits of what one session may set in the environment.
const (
	maxEnvVars  = 64
	maxEnvBytes = 8 << 10
)

// session serves a session channel as the user the connection logged in
// as (checked at login).
func (c *conn) session(nc ssh.NewChannel) {
	ch, reqs, err := nc.Accept()
	if err != nil {
		return
	}
	s := &session{c: c, ch: ch, acc: c.acc, done: make(chan struct{}), replied: make(chan struct{})}
	defer func() {
		s.stop()
		_ = ch.Close()
	}()
	for {
		select {
		case r, ok := <-reqs:
			if !ok {
				return
			}
			err := s.request(r)
			if r.WantReply {
				_ = r.Reply(err == nil, nil)
			}
			s.mu.Lock()
			if s.started && s.cmd != nil {
				select {
				case <-s.replied:
				default:
					close(s.replied)
				}
			}
			s.mu.Unlock()
			if err != nil {
				c.s.log.Debug("ssh request refused", "peer", c.peer, "type", r.Type, "err", err)
			}
		case <-s.done:
			// Requests after the command ended (none are expected) are
			// left to the channel's close.
			go ssh.DiscardRequests(reqs)
			return
		case <-c.ctx.Done():
			return
		}
	}
}

func (s *session) request(r *ssh.Request) error {
	switch r.Type {
	case "env":
		var m struct{ Name, Value string }
		if err := ssh.Unmarshal(r.Payload, &m); err != nil {
			return err
		}
		if !acceptEnv(m.Name, m.Value) {
			return fmt.Errorf("variable %s not accepted", m.Name)
		}
		if len(s.env) >= maxEnvVars || s.envBytes+len(m.Name)+len(m.Value) > maxEnvBytes {
			return fmt.Errorf("%w: at most %d variables, %d bytes", errLimit, maxEnvVars, maxEnvBytes)
		}
		s.envBytes += len(m.Name) + len(m.Value)
		s.env = append(s.env, m.Name+"="+m.Value)
		return nil
	case "pty-req":
		var m ptyRequest
		if err := ssh.Unmarshal(r.Payload, &m); err != nil {
			return err
		}
		if !validTerm(m.Term) {
			return fmt.Errorf("terminal type %q not accepted", m.Term)
		}
		s.mu.Lock()
		s.ptyReq = &m
		s.mu.Unlock()
		return nil
	case "window-change":
		var m struct{ Cols, Rows, Width, Height uint32 }
		if err := ssh.Unmarshal(r.Payload, &m); err != nil {
			return err
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.tty != nil {
			return pty.Setsize(s.tty, &pty.Winsize{Cols: uint16(m.Cols), Rows: uint16(m.Rows)})
		}
		if s.ptyReq != nil {
			s.ptyReq.Cols, s.ptyReq.Rows = m.Cols, m.Rows
		}
		return nil
	case "signal":
		var m struct{ Name string }
		if err := ssh.Unmarshal(r.Payload, &m); err != nil {
			return err
		}
		sig, ok := signals[m.Name]
		if !ok {
			return fmt.Errorf("unknown signal %q", m.Name)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.cmd == nil || s.cmd.Process == nil || s.reaped {
			return errors.New("nothing runs")
		}
		// The whole process group: a shell's children get it too.
		return syscall.Kill(-s.cmd.Process.Pid, sig)
	case "shell":
		return s.start("")
	case "exec":
		var m struct{ Command string }
		if err := ssh.Unmarshal(r.Payload, &m); err != nil {
			return err
		}
		return s.start(m.Command)
	case "subsystem":
		var m struct{ Name string }
		if err := ssh.Unmarshal(r.Payload, &m); err != nil {
			return err
		}
		if m.Name != "sftp" {
			return fmt.Errorf("subsystem %q is not supported", m.Name)
		}
		s.mu.Lock()
		again := s.started
		s.mu.Unlock()
		argv, err := sftpArgv(s.c.s.o)
		if err == nil {
			err = s.startArgv(argv, "<sftp>")
		}
		if err != nil && !again {
			// The client is told only that the subsystem failed: the
			// reason (no server, a binary the user may not run) is for
			// the peer's administrator. Rate-limited: a peer may retry
			// at will.
			s.c.s.refuse.warn("ssh: SFTP not started", "peer", s.c.peer, "user", s.acc.Name, "err", err)
		}
		return err
	default:
		return fmt.Errorf("unsupported request %q", r.Type)
	}
}

// sftpArgv is what serves the sftp subsystem, in startArgv's form: the
// agent binary again with SFTPArg (pkg/sftp, Options.SFTPCommand), or,
// only when the agent could not name its own binary, OpenSSH's
// sftp-server where one is installed.
func sftpArgv(o Options) ([]string, error) {
	if len(o.SFTPCommand) > 0 {
		return append([]string{o.SFTPCommand[0]}, o.SFTPCommand...), nil
	}
	bin := sftpServer(o.SFTPServers)
	if bin == "" {
		return nil, errors.New("SFTP is not available on this peer: the agent cannot find its own binary to serve it and OpenSSH's sftp-server is not installed")
	}
	return []string{bin}, nil
}

// sftpServers are where distributions put OpenSSH's sftp-server.
var sftpServers = []string{"/usr/lib/openssh/sftp-server", "/usr/libexec/openssh/sftp-server", "/usr/lib/ssh/sftp-server", "/usr/libexec/sftp-server"}

// sftpServer is the first executable of candidates (nil: sftpServers).
func sftpServer(candidates []string) string {
	if candidates == nil {
		candidates = sftpServers
	}
	for _, p := range candidates {
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p
		}
	}
	return ""
}

// start runs command (a login shell when empty) as the session's user.
func (s *session) start(command string) error {
	if command == "" {
		// A login shell: argv[0] "-sh" as login(1) does.
		return s.startArgv([]string{s.acc.Shell, "-" + filepath.Base(s.acc.Shell)}, "<shell>")
	}
	return s.startArgv([]string{s.acc.Shell, s.acc.Shell, "-c", command}, command)
}

// startArgv runs argv[0] with the arguments argv[1:] (argv[1] being its
// argv[0]) as the session's user; what names it in the log. A subsystem
// passes just its path.
func (s *session) startArgv(argv []string, what string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		return errors.New("session already started")
	}
	s.started = true
	cmd := exec.Command(argv[0])
	if len(argv) > 1 {
		cmd.Args = argv[1:]
	}
	cmd.Dir = s.acc.Home
	if st, err := os.Stat(cmd.Dir); err != nil || !st.IsDir() {
		cmd.Dir = "/"
	}
	cmd.Env = append(s.acc.env(), s.env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: s.acc.credential()}
	// Command lines can carry secrets and end up in debug bundles: only
	// at Debug.
	s.c.s.log.Info("ssh session", "peer", s.c.peer, "ip", s.c.ip, "user", s.acc.Name, "pty", s.ptyReq != nil)
	s.c.s.log.Debug("ssh session command", "peer", s.c.peer, "user", s.acc.Name, "command", what)
	var wait func() error
	if s.ptyReq != nil {
		cmd.Env = append(cmd.Env, "TERM="+s.ptyReq.Term)
		cmd.SysProcAttr.Setctty = true
		tty, err := pty.StartWithAttrs(cmd, &pty.Winsize{Cols: uint16(s.ptyReq.Cols), Rows: uint16(s.ptyReq.Rows)}, cmd.SysProcAttr)
		if err != nil {
			return fmt.Errorf("starting %s: %w", what, err)
		}
		s.tty = tty
		out := make(chan struct{})
		go func() { _, _ = io.Copy(tty, s.ch) }() // ends when the channel or the PTY closes
		go func() { defer close(out); _, _ = io.Copy(s.ch, tty) }()
		wait = func() error {
			err := s.reap(cmd)
			// The output the command left in the PTY still goes out; the
			// master reads EIO once every holder of the slave is gone.
			select {
			case <-out:
			case <-time.After(2 * time.Second):
			}
			s.mu.Lock()
			s.tty = nil
			s.mu.Unlock()
			_ = tty.Close()
			return err
		}
	} else {
		in, err := cmd.StdinPipe()
		if err != nil {
			return err
		}
		cmd.Stdout, cmd.Stderr = s.ch, s.ch.Stderr()
		// A background child keeping stdout open does not hold the
		// session forever.
		cmd.WaitDelay = 2 * time.Second
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("starting %s: %w", what, err)
		}
		go func() { _, _ = io.Copy(in, s.ch); _ = in.Close() }()
		wait = func() error { return s.reap(cmd) }
	}
	s.cmd = cmd
	// Audited once it runs: the command itself is not (it can carry
	// secrets), only its kind.
	c, id, start, pty := s.c, s.c.s.nextSession(), s.c.s.o.Now(), s.ptyReq != nil
	c.s.audit(c.event(Event{Type: SessionStart, User: s.acc.Name, Kind: sessionKind(what), At: start, Session: id, PTY: pty}))
	go func() {
		err := wait()
		end := c.s.o.Now()
		c.s.audit(c.event(Event{Type: SessionEnd, User: s.acc.Name, Kind: sessionKind(what), At: end, Duration: end.Sub(start), Session: id, PTY: pty}))
		<-s.replied
		s.exit(err)
		close(s.done)
	}()
	return nil
}

// reap waits for cmd and marks it reaped: from then on its pid (and
// process group id) may belong to someone else and is never signalled.
func (s *session) reap(cmd *exec.Cmd) error {
	err := cmd.Wait()
	s.mu.Lock()
	s.reaped = true
	s.mu.Unlock()
	return err
}

// exit tells the client how the command ended and closes the channel.
func (s *session) exit(err error) {
	status := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			_, _ = s.ch.SendRequest("exit-signal", false, ssh.Marshal(struct {
				Signal     string
				CoreDumped bool
				Error      string
				Lang       string
			}{signalName(ws.Signal()), ws.CoreDump(), "", ""}))
			_ = s.ch.Close()
			return
		}
		status = ee.ExitCode()
	} else if err != nil {
		status = 255
	}
	_, _ = s.ch.SendRequest("exit-status", false, ssh.Marshal(struct{ Status uint32 }{uint32(status)}))
	_ = s.ch.CloseWrite()
	_ = s.ch.Close()
}

// stop ends a command still running when its channel goes away.
func (s *session) stop() {
	s.mu.Lock()
	ran := s.cmd != nil
	s.mu.Unlock()
	if !ran {
		return
	}
	if s.kill(syscall.SIGHUP) {
		select {
		case <-s.done:
		case <-time.After(2 * time.Second):
			s.kill(syscall.SIGKILL)
		}
	}
	<-s.done
}

// kill sends sig to the command's process group unless no command ran or
// it was already reaped; it reports whether it sent.
func (s *session) kill(sig syscall.Signal) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil || s.cmd.Process == nil || s.reaped {
		return false
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, sig)
	return true
}

// credential is what a command started for a runs with: nil when the
// agent already is that user.
func (a account) credential() *syscall.Credential {
	if uint32(os.Getuid()) == a.UID {
		return nil
	}
	return &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: a.Groups}
}
