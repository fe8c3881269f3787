// Package mailer sends plain-text e-mail through an SMTP submission server
// (RFC 6409): implicit TLS (port 465), STARTTLS (587) or, only to a
// loopback relay or when the operator says so, no TLS; AUTH PLAIN when a
// user name is configured, never over an unencrypted connection to another
// host. Every session is bounded by timeouts and every message by a size
// cap; headers are built here and refuse line breaks, so a name or address
// cannot inject headers. It sends one message per session and keeps no
// queue: a caller learns at once whether the server accepted the message.
// It does not decide what to send or to whom.
package mailer

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/smtp"
	"strconv"
	"strings"
	"time"
)

// TLSMode is how the connection to the server is protected.
type TLSMode string

// The modes.
const (
	// StartTLS upgrades a plain connection with STARTTLS (port 587); a
	// server that does not offer it is refused.
	StartTLS TLSMode = "starttls"
	// Implicit speaks TLS from the first byte (port 465).
	Implicit TLSMode = "implicit"
	// NoTLS sends in the clear: only to a loopback relay, or with
	// Config.AllowPlaintext.
	NoTLS TLSMode = "none"
)

// Defaults of Config.
const (
	DefaultPort            = 587
	DefaultDialTimeout     = 10 * time.Second
	DefaultSendTimeout     = 30 * time.Second
	DefaultMaxMessageBytes = 256 << 10
)

// Errors callers check with errors.Is.
var (
	// ErrConfig: the configuration cannot work.
	ErrConfig = errors.New("smtp configuration")
	// ErrMessage: the message cannot be sent as it is (a line break in a
	// header, a bad address, too large).
	ErrMessage = errors.New("bad message")
	// ErrDelivery: the server could not be reached or refused the message.
	ErrDelivery = errors.New("the mail server did not accept the message")
)

// Config configures the mailer.
type Config struct {
	Host string
	// Port (0: DefaultPort).
	Port int
	// Username and Password authenticate with AUTH PLAIN (no user name:
	// no authentication).
	Username, Password string
	// From is the sender, a bare address or "Name <address>".
	From string
	// TLS (empty: Implicit on port 465, StartTLS otherwise).
	TLS TLSMode
	// AllowPlaintext permits NoTLS to a host that is not loopback.
	AllowPlaintext bool
	// DialTimeout bounds connecting (0: DefaultDialTimeout); SendTimeout
	// bounds the whole session, TLS and authentication included (0:
	// DefaultSendTimeout).
	DialTimeout, SendTimeout time.Duration
	// MaxMessageBytes caps an encoded message (0: DefaultMaxMessageBytes).
	MaxMessageBytes int
	// RootCAs verify the server's certificate (nil: the system's).
	RootCAs *x509.CertPool
	// HelloName is sent with EHLO (empty: "localhost").
	HelloName string
}

// Enabled reports whether a server is configured.
func (c Config) Enabled() bool { return c.Host != "" }

// withDefaults fills the zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Host == "" {
		return c, fmt.Errorf("%w: no host", ErrConfig)
	}
	if strings.ContainsAny(c.Host, " \r\n/") {
		return c, fmt.Errorf("%w: host %q is not a host name or address", ErrConfig, c.Host)
	}
	if c.Port == 0 {
		c.Port = DefaultPort
	}
	if c.Port < 1 || c.Port > 65535 {
		return c, fmt.Errorf("%w: port %d is out of range 1-65535", ErrConfig, c.Port)
	}
	if c.TLS == "" {
		c.TLS = StartTLS
		if c.Port == 465 {
			c.TLS = Implicit
		}
	}
	switch c.TLS {
	case StartTLS, Implicit:
	case NoTLS:
		if !loopback(c.Host) && !c.AllowPlaintext {
			return c, fmt.Errorf("%w: TLS \"none\" sends mail (and the invitation links in it) in the clear: allowed only to a loopback relay (localhost, 127.0.0.1, ::1) unless plaintext is explicitly allowed", ErrConfig)
		}
		if !loopback(c.Host) && c.Username != "" {
			return c, fmt.Errorf("%w: a password is never sent unencrypted to another host: use TLS starttls or implicit with a user name", ErrConfig)
		}
	default:
		return c, fmt.Errorf("%w: TLS mode %q (want starttls, implicit or none)", ErrConfig, c.TLS)
	}
	if c.Username != "" && c.Password == "" {
		return c, fmt.Errorf("%w: a user name needs a password", ErrConfig)
	}
	if c.Username == "" && c.Password != "" {
		return c, fmt.Errorf("%w: a password needs a user name", ErrConfig)
	}
	if c.From == "" {
		return c, fmt.Errorf("%w: no sender address (from)", ErrConfig)
	}
	if _, err := parseAddress(c.From, true); err != nil {
		return c, fmt.Errorf("%w: sender: %w", ErrConfig, err)
	}
	for _, d := range []*time.Duration{&c.DialTimeout, &c.SendTimeout} {
		if *d < 0 {
			return c, fmt.Errorf("%w: negative timeout", ErrConfig)
		}
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.MaxMessageBytes < 0 || (c.MaxMessageBytes > 0 && c.MaxMessageBytes < 1024) {
		return c, fmt.Errorf("%w: the message size cap must be at least 1024 bytes", ErrConfig)
	}
	if c.MaxMessageBytes == 0 {
		c.MaxMessageBytes = DefaultMaxMessageBytes
	}
	if c.HelloName == "" {
		c.HelloName = "localhost"
	}
	return c, nil
}

// loopback reports whether host is this machine.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Mailer sends messages. It is safe for concurrent use: each Send is one
// session of its own.
type Mailer struct {
	c   Config
	log *slog.Logger
	now func() time.Time
}

// New checks the configuration and returns a mailer; log may be nil.
func New(c Config, log *slog.Logger) (*Mailer, error) {
	c, err := c.withDefaults()
	if err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Mailer{c: c, log: log, now: time.Now}, nil
}

// Message is one plain-text mail to one recipient.
type Message struct {
	// To is a bare address.
	To      string
	Subject string
	// Text is the body; lines end in \n.
	Text string
}

// Send delivers msg to the server. It returns when the server accepted
// the message (after the end of DATA) or refused it, or when ctx ends or
// the session timeout passes.
func (m *Mailer) Send(ctx context.Context, msg Message) error {
	raw, to, err := m.build(msg)
	if err != nil {
		return err
	}
	start := m.now()
	if err := m.session(ctx, to, raw); err != nil {
		m.log.WarnContext(ctx, "mail not sent", "server", m.addr(), "to", to, "err", err)
		return fmt.Errorf("%w: %s: %w", ErrDelivery, m.addr(), err)
	}
	m.log.InfoContext(ctx, "mail sent", "server", m.addr(), "to", to, "bytes", len(raw), "took", m.now().Sub(start))
	return nil
}

func (m *Mailer) addr() string { return net.JoinHostPort(m.c.Host, strconv.Itoa(m.c.Port)) }

func (m *Mailer) tlsConfig() *tls.Config {
	return &tls.Config{ServerName: strings.Trim(m.c.Host, "[]"), RootCAs: m.c.RootCAs, MinVersion: tls.VersionTLS12}
}

// session runs one SMTP session: connect, TLS, EHLO, AUTH, MAIL, RCPT,
// DATA, QUIT.
func (m *Mailer) session(ctx context.Context, to string, raw []byte) (err error) {
	ctx, cancel := context.WithTimeout(ctx, m.c.SendTimeout)
	defer cancel()
	defer func() { err = timedOut(ctx, err) }()
	d := net.Dialer{Timeout: m.c.DialTimeout}
	conn, err := d.DialContext(ctx, "tcp", m.addr())
	if err != nil {
		return err
	}
	defer conn.Close()
	// The deadline bounds every read and write; ending ctx (the caller
	// gave up, or the session timeout) unblocks them at once.
	deadline, _ := ctx.Deadline()
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if m.c.TLS == Implicit {
		tc := tls.Client(conn, m.tlsConfig())
		if err := tc.HandshakeContext(ctx); err != nil {
			return fmt.Errorf("TLS: %w", err)
		}
		conn = tc
	}
	c, err := smtp.NewClient(conn, m.c.Host)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Hello(m.c.HelloName); err != nil {
		return err
	}
	if m.c.TLS == StartTLS {
		if ok, _ := c.Extension("STARTTLS"); !ok {
			return errors.New("the server does not offer STARTTLS (set the TLS mode to implicit for port 465)")
		}
		if err := c.StartTLS(m.tlsConfig()); err != nil {
			return fmt.Errorf("STARTTLS: %w", err)
		}
	}
	if ok, v := c.Extension("SIZE"); ok {
		if limit, err := strconv.Atoi(strings.TrimSpace(v)); err == nil && limit > 0 && len(raw) > limit {
			return fmt.Errorf("the message has %d bytes, the server takes at most %d", len(raw), limit)
		}
	}
	if m.c.Username != "" {
		if ok, _ := c.Extension("AUTH"); !ok {
			return errors.New("the server does not offer AUTH, but a user name is configured")
		}
		// PlainAuth itself refuses an unencrypted connection to anything
		// but localhost.
		if err := c.Auth(smtp.PlainAuth("", m.c.Username, m.c.Password, m.c.Host)); err != nil {
			return fmt.Errorf("AUTH PLAIN: %w", err)
		}
	}
	from, _ := parseAddress(m.c.From, true)
	if err := c.Mail(from.Address); err != nil {
		return fmt.Errorf("MAIL FROM: %w", err)
	}
	if err := c.Rcpt(to); err != nil {
		return fmt.Errorf("RCPT TO: %w", err)
	}
	w, err := c.Data()
	if err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if _, err := w.Write(raw); err != nil {
		return fmt.Errorf("DATA: %w", err)
	}
	if err := w.Close(); err != nil {
		return fmt.Errorf("end of DATA: %w", err)
	}
	// The message is accepted; a failing QUIT changes nothing.
	_ = c.Quit()
	return nil
}

// timedOut names the end of ctx (the caller gave up, or the session
// timeout passed) as the cause of an I/O error it caused.
func timedOut(ctx context.Context, err error) error {
	if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return err
	}
	if cause := ctx.Err(); cause != nil {
		return fmt.Errorf("%w: %w", cause, err)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: %w", context.DeadlineExceeded, err)
	}
	return err
}
