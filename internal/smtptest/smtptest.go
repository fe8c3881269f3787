// Package smtptest runs a real SMTP server in-process for tests (on
// emersion/go-smtp): STARTTLS or implicit TLS with a test certificate,
// AUTH PLAIN against one user name and password, and a mailbox of what it
// accepted, with the session facts (TLS, authenticated user) beside each
// message. It can refuse messages on demand. It is a test rig: nothing
// here is for production.
package smtptest

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// Options configure the server.
type Options struct {
	// TLS turns on STARTTLS (or, with Implicit, TLS from the first byte).
	TLS      *tls.Config
	Implicit bool
	// Username and Password, when set, are required (AUTH PLAIN, offered
	// only over TLS unless AllowInsecureAuth) before MAIL.
	Username, Password string
	AllowInsecureAuth  bool
	// MaxMessageBytes is announced with SIZE (0: go-smtp's default).
	MaxMessageBytes int64
}

// Message is one accepted mail.
type Message struct {
	From string
	To   []string
	Data []byte
	// TLS: the session was encrypted; User: who authenticated.
	TLS  bool
	User string
}

// Server is a running SMTP server.
type Server struct {
	Host string
	Port int

	srv *smtp.Server
	ln  net.Listener
	o   Options

	mu        sync.Mutex
	msgs      []Message
	refuse    error
	authFails int
	arrived   chan struct{}
}

// Start runs a server on 127.0.0.1 until the test ends.
func Start(t testing.TB, o Options) *Server {
	t.Helper()
	s := &Server{o: o, arrived: make(chan struct{}, 100)}
	s.srv = smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) { return &session{s: s, c: c}, nil }))
	s.srv.Domain = "smtp.test"
	s.srv.AllowInsecureAuth = o.AllowInsecureAuth
	s.srv.ReadTimeout, s.srv.WriteTimeout = 10*time.Second, 10*time.Second
	if o.MaxMessageBytes > 0 {
		s.srv.MaxMessageBytes = o.MaxMessageBytes
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.TLS != nil {
		if o.Implicit {
			ln = tls.NewListener(ln, o.TLS)
		} else {
			s.srv.TLSConfig = o.TLS
		}
	}
	s.ln = ln
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	s.Host = host
	s.Port, _ = strconv.Atoi(port)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.srv.Serve(ln)
	}()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return s
}

// Close stops the server: later sessions find nothing listening.
func (s *Server) Close() {
	// The listener too: Serve may not have registered it yet.
	_ = s.ln.Close()
	_ = s.srv.Close()
}

// Refuse makes the server refuse every message at the end of DATA with
// err (nil: accept again).
func (s *Server) Refuse(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refuse = err
}

// Messages returns what was accepted so far.
func (s *Server) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.msgs...)
}

// AuthFailures counts refused AUTH attempts.
func (s *Server) AuthFailures() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.authFails
}

// Wait returns the n-th accepted message (1-based), failing the test
// after 10 s.
func (s *Server) Wait(t testing.TB, n int) Message {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		if ms := s.Messages(); len(ms) >= n {
			return ms[n-1]
		}
		select {
		case <-s.arrived:
		case <-deadline:
			t.Fatalf("message %d did not arrive (%d did)", n, len(s.Messages()))
		}
	}
}

type session struct {
	s    *Server
	c    *smtp.Conn
	user string
	msg  Message
}

func (x *session) tls() bool { _, ok := x.c.TLSConnectionState(); return ok }

func (x *session) AuthMechanisms() []string {
	if x.s.o.Username == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (x *session) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		if user != x.s.o.Username || pass != x.s.o.Password {
			x.s.mu.Lock()
			x.s.authFails++
			x.s.mu.Unlock()
			return errors.New("wrong user name or password")
		}
		x.user = user
		return nil
	}), nil
}

func (x *session) Mail(from string, _ *smtp.MailOptions) error {
	if x.s.o.Username != "" && x.user == "" {
		return smtp.ErrAuthRequired
	}
	x.msg = Message{From: from, TLS: x.tls(), User: x.user}
	return nil
}

func (x *session) Rcpt(to string, _ *smtp.RcptOptions) error {
	x.msg.To = append(x.msg.To, to)
	return nil
}

func (x *session) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.s.mu.Lock()
	refuse := x.s.refuse
	if refuse == nil {
		x.msg.Data = b
		x.s.msgs = append(x.s.msgs, x.msg)
	}
	x.s.mu.Unlock()
	if refuse != nil {
		return &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: refuse.Error()}
	}
	select {
	case x.s.arrived <- struct{}{}:
	default:
	}
	return nil
}

func (x *session) Reset()        { x.msg = Message{} }
func (x *session) Logout() error { return nil }
