package agentinstall

import (
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
)

// safeURL is what may stand between the quotes of SERVER='...': nothing a
// shell interprets inside or after single quotes.
var safeURL = regexp.MustCompile(`^https?://[A-Za-z0-9.:\[\]-]+$`)

// FuzzScriptHost: whatever Host header a client sends, the script either
// is refused or names a URL that cannot break out of its quotes.
func FuzzScriptHost(f *testing.F) {
	for _, s := range []string{"vpn.example.com", "10.0.0.1:33073", "[2001:db8::1]:443", "a'b", "x;rm -rf /", "$(id)", "h\nx", "[::1]:1'"} {
		f.Add(s)
	}
	h, err := New(Options{Dir: f.TempDir()})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, host string) {
		req := httptest.NewRequest("GET", "http://x/install.sh", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.serveScript(rec, req)
		if rec.Code != 200 {
			return
		}
		body := rec.Body.String()
		i := strings.Index(body, "\nSERVER='")
		if i < 0 {
			t.Fatalf("no SERVER line for host %q", host)
		}
		rest := body[i+len("\nSERVER='"):]
		u, _, ok := strings.Cut(rest, "'\n")
		if !ok || !safeURL.MatchString(u) {
			t.Fatalf("host %q gave SERVER='%s", host, rest[:min(len(rest), 80)])
		}
	})
}
