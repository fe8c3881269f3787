package mailer_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"mime"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/smtptest"
	"github.com/wiremesh/wiremesh/internal/testcert"
	"github.com/wiremesh/wiremesh/management/mailer"
)

// decoded parses an accepted message and returns its headers and body.
func decoded(t *testing.T, raw []byte) (mail.Header, string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("not a message: %v\n%s", err, raw)
	}
	if m.Header.Get("Content-Transfer-Encoding") != "quoted-printable" || m.Header.Get("Content-Type") != "text/plain; charset=utf-8" {
		t.Fatalf("headers %v", m.Header)
	}
	body, err := io.ReadAll(quotedprintable.NewReader(m.Body))
	if err != nil {
		t.Fatal(err)
	}
	return m.Header, string(body)
}

func send(t *testing.T, c mailer.Config, msg mailer.Message) error {
	t.Helper()
	m, err := mailer.New(c, nil)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return m.Send(ctx, msg)
}

var longLink = "https://vpn.example.com/invite?token=nbi_" + strings.Repeat("Ab9_", 20)

// TestStartTLSAuthPlain: a submission server on STARTTLS with AUTH PLAIN
// gets the message over TLS, authenticated, with the headers and a body
// that decodes to the text (a link past quoted-printable's line length,
// non-ASCII characters) intact.
func TestStartTLSAuthPlain(t *testing.T) {
	cert := testcert.New(t)
	srv := smtptest.Start(t, smtptest.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert.TLS}}, Username: "mailer", Password: "s3cret"})
	err := send(t, mailer.Config{Host: srv.Host, Port: srv.Port, Username: "mailer", Password: "s3cret", From: "Wiremesh <noreply@example.com>",
		RootCAs: cert.Pool}, mailer.Message{To: "Zoë@example.org", Subject: "Grüße, you are invited", Text: "Hello Zoë,\n\n" + longLink + "\n"})
	if err != nil {
		t.Fatal(err)
	}
	got := srv.Wait(t, 1)
	if !got.TLS || got.User != "mailer" || got.From != "noreply@example.com" || len(got.To) != 1 || got.To[0] != "Zoë@example.org" {
		t.Fatalf("session: TLS %v, user %q, from %q, to %v", got.TLS, got.User, got.From, got.To)
	}
	h, body := decoded(t, got.Data)
	subject, err := new(mime.WordDecoder).DecodeHeader(h.Get("Subject"))
	if err != nil || subject != "Grüße, you are invited" {
		t.Fatalf("subject %q (%v)", h.Get("Subject"), err)
	}
	if from, _ := h.AddressList("From"); len(from) != 1 || from[0].Address != "noreply@example.com" || from[0].Name != "Wiremesh" {
		t.Fatalf("From %q", h.Get("From"))
	}
	if h.Get("Message-Id") == "" || h.Get("Date") == "" || h.Get("Mime-Version") != "1.0" {
		t.Fatalf("headers %v", h)
	}
	if _, err := h.Date(); err != nil {
		t.Fatalf("Date %q: %v", h.Get("Date"), err)
	}
	if body != "Hello Zoë,\r\n\r\n"+longLink+"\r\n" {
		t.Fatalf("body %q", body)
	}
	for _, line := range strings.Split(string(got.Data), "\r\n") {
		if len(line) > 78 {
			t.Fatalf("line of %d characters on the wire: %q", len(line), line)
		}
	}
}

// TestImplicitTLS: port 465-style TLS from the first byte.
func TestImplicitTLS(t *testing.T) {
	cert := testcert.New(t)
	srv := smtptest.Start(t, smtptest.Options{TLS: &tls.Config{Certificates: []tls.Certificate{cert.TLS}}, Implicit: true, Username: "u", Password: "p"})
	if err := send(t, mailer.Config{Host: srv.Host, Port: srv.Port, TLS: mailer.Implicit, Username: "u", Password: "p", From: "a@example.com", RootCAs: cert.Pool},
		mailer.Message{To: "b@example.com", Subject: "s", Text: "t"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Wait(t, 1); !got.TLS || got.User != "u" {
		t.Fatalf("TLS %v user %q", got.TLS, got.User)
	}
}

// TestPlainLoopback: no TLS to a relay on loopback.
func TestPlainLoopback(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	if err := send(t, mailer.Config{Host: srv.Host, Port: srv.Port, TLS: mailer.NoTLS, From: "a@example.com"},
		mailer.Message{To: "b@example.com", Subject: "s", Text: "t"}); err != nil {
		t.Fatal(err)
	}
	if got := srv.Wait(t, 1); got.TLS {
		t.Fatal("TLS without asking")
	}
}

// TestDeliveryFailures: every way the server can fail is ErrDelivery,
// and nothing is accepted.
func TestDeliveryFailures(t *testing.T) {
	cert := testcert.New(t)
	tlsConf := &tls.Config{Certificates: []tls.Certificate{cert.TLS}}
	msg := mailer.Message{To: "b@example.com", Subject: "s", Text: "t"}
	for _, c := range []struct {
		name string
		srv  smtptest.Options
		conf func(*mailer.Config)
		want string
	}{
		{name: "no STARTTLS offered", srv: smtptest.Options{}, want: "does not offer STARTTLS"},
		{name: "untrusted certificate", srv: smtptest.Options{TLS: tlsConf}, conf: func(c *mailer.Config) { c.RootCAs = nil }, want: "certificate"},
		{name: "wrong password", srv: smtptest.Options{TLS: tlsConf, Username: "u", Password: "right"},
			conf: func(c *mailer.Config) { c.Username, c.Password = "u", "wrong" }, want: "AUTH PLAIN"},
		{name: "authentication required", srv: smtptest.Options{TLS: tlsConf, Username: "u", Password: "p"}, want: "MAIL FROM"},
		{name: "message larger than the server takes", srv: smtptest.Options{TLS: tlsConf, MaxMessageBytes: 1100},
			conf: func(c *mailer.Config) { c.MaxMessageBytes = 4096 }, want: "the server takes at most 1100"},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := smtptest.Start(t, c.srv)
			conf := mailer.Config{Host: srv.Host, Port: srv.Port, From: "a@example.com", RootCAs: cert.Pool}
			if c.conf != nil {
				c.conf(&conf)
			}
			m := msg
			if c.srv.MaxMessageBytes > 0 {
				m.Text = strings.Repeat("x", 1500)
			}
			err := send(t, conf, m)
			if !errors.Is(err, mailer.ErrDelivery) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want ErrDelivery about %q", err, c.want)
			}
			if n := len(srv.Messages()); n != 0 {
				t.Fatalf("%d messages accepted", n)
			}
		})
	}
	t.Run("refused at the end of DATA", func(t *testing.T) {
		srv := smtptest.Start(t, smtptest.Options{TLS: tlsConf})
		srv.Refuse(errors.New("policy says no"))
		err := send(t, mailer.Config{Host: srv.Host, Port: srv.Port, From: "a@example.com", RootCAs: cert.Pool}, msg)
		if !errors.Is(err, mailer.ErrDelivery) || !strings.Contains(err.Error(), "policy says no") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("server down", func(t *testing.T) {
		ln, _ := net.Listen("tcp", "127.0.0.1:0")
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		err := send(t, mailer.Config{Host: "127.0.0.1", Port: port, From: "a@example.com"}, msg)
		if !errors.Is(err, mailer.ErrDelivery) {
			t.Fatalf("got %v", err)
		}
	})
}

// TestSessionTimeout: a server that accepts the connection and never
// speaks costs the session timeout, not forever.
func TestSessionTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	start := time.Now()
	err = send(t, mailer.Config{Host: "127.0.0.1", Port: ln.Addr().(*net.TCPAddr).Port, From: "a@example.com", SendTimeout: 300 * time.Millisecond},
		mailer.Message{To: "b@example.com", Subject: "s", Text: "t"})
	if !errors.Is(err, mailer.ErrDelivery) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("after %v: %v", time.Since(start), err)
	}
}

// TestBadMessages: header injection, display names in the recipient and
// oversized messages are refused before any connection.
func TestBadMessages(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	conf := mailer.Config{Host: srv.Host, Port: srv.Port, TLS: mailer.NoTLS, From: "a@example.com", MaxMessageBytes: 1024}
	for name, msg := range map[string]mailer.Message{
		"subject injection":   {To: "b@example.com", Subject: "hi\r\nBcc: victim@example.com", Text: "t"},
		"recipient injection": {To: "b@example.com\r\nBcc: victim@example.com", Subject: "s", Text: "t"},
		"recipient with name": {To: "Bob <b@example.com>", Subject: "s", Text: "t"},
		"not an address":      {To: "nobody", Subject: "s", Text: "t"},
		"over the size cap":   {To: "b@example.com", Subject: "s", Text: strings.Repeat("y", 2000)},
	} {
		if err := send(t, conf, msg); !errors.Is(err, mailer.ErrMessage) {
			t.Errorf("%s: got %v, want ErrMessage", name, err)
		}
	}
	if n := len(srv.Messages()); n != 0 {
		t.Fatalf("%d messages accepted", n)
	}
}

// TestConfig: what can and cannot be configured.
func TestConfig(t *testing.T) {
	ok := mailer.Config{Host: "smtp.example.com", From: "noreply@example.com"}
	for _, c := range []struct {
		name string
		edit func(*mailer.Config)
		want string // "" = valid
	}{
		{name: "defaults", edit: func(*mailer.Config) {}},
		{name: "implicit on 465 by default", edit: func(c *mailer.Config) { c.Port = 465 }},
		{name: "none to loopback", edit: func(c *mailer.Config) { c.Host, c.TLS = "127.0.0.1", mailer.NoTLS }},
		{name: "none to localhost with a password", edit: func(c *mailer.Config) { c.Host, c.TLS, c.Username, c.Password = "localhost", mailer.NoTLS, "u", "p" }},
		{name: "none to a remote host", edit: func(c *mailer.Config) { c.TLS = mailer.NoTLS }, want: "loopback"},
		{name: "none allowed explicitly", edit: func(c *mailer.Config) { c.TLS, c.AllowPlaintext = mailer.NoTLS, true }},
		{name: "none allowed, but a password", edit: func(c *mailer.Config) { c.TLS, c.AllowPlaintext, c.Username, c.Password = mailer.NoTLS, true, "u", "p" },
			want: "never sent unencrypted"},
		{name: "unknown TLS mode", edit: func(c *mailer.Config) { c.TLS = "ssl" }, want: "want starttls, implicit or none"},
		{name: "no host", edit: func(c *mailer.Config) { c.Host = "" }, want: "no host"},
		{name: "no sender", edit: func(c *mailer.Config) { c.From = "" }, want: "sender"},
		{name: "bad sender", edit: func(c *mailer.Config) { c.From = "noreply" }, want: "sender"},
		{name: "sender injection", edit: func(c *mailer.Config) { c.From = "a@example.com\r\nBcc: x@example.com" }, want: "line break"},
		{name: "user without password", edit: func(c *mailer.Config) { c.Username = "u" }, want: "needs a password"},
		{name: "port out of range", edit: func(c *mailer.Config) { c.Port = 70000 }, want: "out of range"},
		{name: "tiny size cap", edit: func(c *mailer.Config) { c.MaxMessageBytes = 10 }, want: "at least 1024"},
		{name: "negative timeout", edit: func(c *mailer.Config) { c.SendTimeout = -time.Second }, want: "negative"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conf := ok
			c.edit(&conf)
			_, err := mailer.New(conf, nil)
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case c.want != "" && (!errors.Is(err, mailer.ErrConfig) || !strings.Contains(err.Error(), c.want)):
				t.Fatalf("got %v, want ErrConfig about %q", err, c.want)
			}
		})
	}
}

// TestDefaultMode: on a port other than 465 the default is STARTTLS: a
// server that does not offer it receives nothing in the clear.
func TestDefaultMode(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{})
	m, err := mailer.New(mailer.Config{Host: srv.Host, Port: srv.Port, TLS: "", From: "a@example.com"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	err = m.Send(context.Background(), mailer.Message{To: "b@example.com", Subject: "s", Text: "t"})
	if !errors.Is(err, mailer.ErrDelivery) || !strings.Contains(err.Error(), "STARTTLS") {
		t.Fatalf("port %s without TLS mode: %v", strconv.Itoa(srv.Port), err)
	}
}
