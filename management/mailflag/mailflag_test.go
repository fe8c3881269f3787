package mailflag

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/internal/smtptest"
	"github.com/wiremesh/wiremesh/management/mailer"
	"github.com/wiremesh/wiremesh/management/server"
)

func resolve(t *testing.T, args ...string) (server.Mail, error) {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f := Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Mail(nil)
}

// TestPasswordSources: the password reaches AUTH PLAIN from the flag, a
// file or the environment.
func TestPasswordSources(t *testing.T) {
	srv := smtptest.Start(t, smtptest.Options{Username: "u", Password: "from-somewhere", AllowInsecureAuth: true})
	file := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(file, []byte("from-somewhere\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--smtp-host", srv.Host, "--smtp-port", strconv.Itoa(srv.Port), "--smtp-tls", "none", "--smtp-from", "n@example.com", "--smtp-username", "u"}
	for i, c := range []struct {
		name string
		args []string
		env  string
	}{
		{name: "flag", args: []string{"--smtp-password", "from-somewhere"}},
		{name: "file", args: []string{"--smtp-password-file", file}},
		{name: "env", env: "from-somewhere"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv(EnvPassword, c.env)
			}
			m, err := resolve(t, append(base, c.args...)...)
			if err != nil || m.Mailer == nil {
				t.Fatalf("%v %v", m, err)
			}
			if err := m.Mailer.Send(context.Background(), mailer.Message{To: "x@example.com", Subject: "s", Text: "t"}); err != nil {
				t.Fatal(err)
			}
			if got := srv.Wait(t, i+1); got.User != "u" {
				t.Fatalf("authenticated as %q", got.User)
			}
		})
	}
	if srv.AuthFailures() != 0 {
		t.Fatalf("%d failed logins", srv.AuthFailures())
	}
}

// TestRefused: flags that cannot work stop the server at start.
func TestRefused(t *testing.T) {
	if m, err := resolve(t); err != nil || m.Mailer != nil {
		t.Fatalf("no flags: %v %v", m, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--smtp-port", "465"}, "--smtp-port needs --smtp-host"},
		{[]string{"--smtp-password", "x"}, "--smtp-password needs --smtp-host"},
		{[]string{"--invite-url", "https://x.example/invite"}, "--invite-url needs --smtp-host"},
		{[]string{"--smtp-host", "smtp.example.com"}, "sender"},
		{[]string{"--smtp-host", "smtp.example.com", "--smtp-from", "n@example.com", "--smtp-tls", "none"}, "loopback"},
		{[]string{"--smtp-host", "smtp.example.com", "--smtp-from", "n@example.com", "--smtp-tls", "none", "--smtp-allow-plaintext", "--smtp-username", "u", "--smtp-password", "p"}, "never sent unencrypted"},
		{[]string{"--smtp-host", "smtp.example.com", "--smtp-from", "n@example.com", "--smtp-tls", "tls"}, "want starttls, implicit or none"},
		{[]string{"--smtp-host", "smtp.example.com", "--smtp-from", "n@example.com", "--smtp-timeout", "0s"}, "must be positive"},
		{[]string{"--smtp-host", "smtp.example.com", "--smtp-from", "n@example.com", "--smtp-password", "a", "--smtp-password-file", "/x"}, "both given"},
	} {
		if _, err := resolve(t, c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: got %v, want %q", c.args, err, c.want)
		}
	}
	m, err := resolve(t, "--smtp-host", "smtp.example.com", "--smtp-from", "Ops <n@example.com>", "--smtp-tls", "none", "--smtp-allow-plaintext")
	if err != nil || m.Mailer == nil {
		t.Fatalf("plaintext allowed explicitly: %v", err)
	}
}
