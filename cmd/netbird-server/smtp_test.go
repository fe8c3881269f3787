package main_test

import (
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/internal/proctest"
)

// TestSMTPFlags: both servers take the SMTP flags and refuse settings
// that cannot work at start, with the reason.
func TestSMTPFlags(t *testing.T) {
	for _, c := range []struct {
		bin  string
		args []string
		want string
	}{
		{"netbird-server", []string{"--smtp-host", "smtp.example.com", "--smtp-from", "n@example.com", "--smtp-tls", "none"}, "loopback"},
		{"netbird-server", []string{"--smtp-port", "465"}, "--smtp-port needs --smtp-host"},
		{"netbird-mgmt", []string{"--signal", "127.0.0.1:1", "--smtp-host", "smtp.example.com", "--smtp-from", "n@example.com",
			"--smtp-username", "u"}, "needs a password"},
		{"netbird-mgmt", []string{"--signal", "127.0.0.1:1", "--smtp-host", "smtp.example.com", "--smtp-from", "n@example.com"},
			"need the built-in identity provider"},
	} {
		out, err := proctest.Run(t, c.bin, append([]string{"--datadir", t.TempDir(), "--listen", "127.0.0.1:0"}, c.args...)...)
		if err == nil || !strings.Contains(out, c.want) {
			t.Errorf("%s %v: %v, want %q in:\n%s", c.bin, c.args, err, c.want, out)
		}
	}
}
