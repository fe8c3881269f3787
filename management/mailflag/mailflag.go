// Package mailflag binds the command-line flags that configure invitation
// e-mails (the SMTP server, sender, TLS, timeouts and size cap, the page
// the mails link to) and resolves them into a server.Mail. The password
// may come from --smtp-password-file or NB_SMTP_PASSWORD(_FILE) instead
// of the command line. It is shared by netbird-server and netbird-mgmt;
// it sends nothing itself (package mailer does).
package mailflag

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/internal/secretflag"
	"github.com/wiremesh/wiremesh/management/mailer"
	"github.com/wiremesh/wiremesh/management/server"
)

// EnvPassword is read when --smtp-password is absent.
const EnvPassword = "NB_SMTP_PASSWORD"

// Flags holds the parsed values.
type Flags struct {
	fs                             *pflag.FlagSet
	host, username, password, from string
	tls, inviteURL                 string
	port, maxBytes                 int
	allowPlaintext                 bool
	dialTimeout, timeout           time.Duration
	passwordFile                   *secretflag.Secret
}

// Bind registers the flags on fs.
func Bind(fs *pflag.FlagSet) *Flags {
	f := &Flags{fs: fs}
	fs.StringVar(&f.host, "smtp-host", "", "SMTP submission server for invitation e-mails (built-in identity provider; none: invitations are links an admin passes on)")
	fs.IntVar(&f.port, "smtp-port", mailer.DefaultPort, "SMTP server port (587 submission with STARTTLS, 465 implicit TLS)")
	fs.StringVar(&f.username, "smtp-username", "", "SMTP user name for AUTH PLAIN (none: no authentication)")
	fs.StringVar(&f.password, "smtp-password", "", "SMTP password (env "+EnvPassword+"; a password here shows in ps: prefer --smtp-password-file or the env)")
	f.passwordFile = secretflag.File(fs, "smtp-password", EnvPassword, &f.password)
	fs.StringVar(&f.from, "smtp-from", "", "sender of invitation e-mails, an address or \"Name <address>\"")
	fs.StringVar(&f.tls, "smtp-tls", "", "starttls, implicit or none (default: implicit on port 465, starttls otherwise; none only to a loopback host or with --smtp-allow-plaintext)")
	fs.BoolVar(&f.allowPlaintext, "smtp-allow-plaintext", false, "allow --smtp-tls none to a host that is not loopback: mails and their invitation links cross the network unencrypted")
	fs.DurationVar(&f.dialTimeout, "smtp-dial-timeout", mailer.DefaultDialTimeout, "how long connecting to the SMTP server may take")
	fs.DurationVar(&f.timeout, "smtp-timeout", mailer.DefaultSendTimeout, "how long one SMTP session (TLS, login and sending) may take")
	fs.IntVar(&f.maxBytes, "smtp-max-message-size", mailer.DefaultMaxMessageBytes, "largest e-mail sent, in bytes")
	fs.StringVar(&f.inviteURL, "invite-url", "", "page invitation e-mails link to, ?token= added (default: <built-in issuer origin>/invite, the dashboard this server serves)")
	return f
}

// Mail resolves the flags: a server.Mail with a mailer when --smtp-host is
// given, the zero value otherwise (then no other SMTP flag may be given).
func (f *Flags) Mail(log *slog.Logger) (server.Mail, error) {
	if err := f.passwordFile.Resolve(); err != nil {
		return server.Mail{}, err
	}
	if f.host == "" {
		for _, n := range []string{"smtp-port", "smtp-username", "smtp-password", "smtp-from", "smtp-tls", "smtp-allow-plaintext",
			"smtp-dial-timeout", "smtp-timeout", "smtp-max-message-size", "invite-url"} {
			if f.fs.Changed(n) {
				return server.Mail{}, fmt.Errorf("--%s needs --smtp-host", n)
			}
		}
		if f.passwordFile.Given() {
			return server.Mail{}, errors.New("--smtp-password-file needs --smtp-host")
		}
		return server.Mail{}, nil
	}
	if f.dialTimeout <= 0 || f.timeout <= 0 {
		return server.Mail{}, errors.New("--smtp-dial-timeout and --smtp-timeout must be positive")
	}
	if f.maxBytes <= 0 {
		return server.Mail{}, errors.New("--smtp-max-message-size must be positive")
	}
	m, err := mailer.New(mailer.Config{Host: f.host, Port: f.port, Username: f.username, Password: f.password, From: f.from,
		TLS: mailer.TLSMode(f.tls), AllowPlaintext: f.allowPlaintext, DialTimeout: f.dialTimeout, SendTimeout: f.timeout,
		MaxMessageBytes: f.maxBytes}, log)
	if err != nil {
		return server.Mail{}, fmt.Errorf("SMTP settings (--smtp-*): %w", err)
	}
	return server.Mail{Mailer: m, InviteURL: f.inviteURL}, nil
}
