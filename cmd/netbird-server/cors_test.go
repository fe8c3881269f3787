package main_test

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/proctest"
)

// TestDashboardOrigin: --dashboard-origin lets that origin's browsers call
// the REST API (an answered preflight); others get no CORS header; a
// malformed origin stops the server with a clear error.
func TestDashboardOrigin(t *testing.T) {
	out, err := proctest.Run(t, "netbird-server", "--datadir", t.TempDir(), "--listen", "127.0.0.1:0", "--stun-port", "0",
		"--dashboard-origin", "dash.example.com")
	if err == nil || !strings.Contains(out, "--dashboard-origin") {
		t.Fatalf("a malformed origin: %v\n%s", err, out)
	}

	srv := proctest.Start(t, nil, "netbird-server", "--datadir", t.TempDir(), "--listen", "127.0.0.1:0", "--stun-port", strconv.Itoa(freeUDPPort(t)),
		"--turn-relay-ip", "127.0.0.1", "--owner-email", "", "--dashboard-origin", "https://dash.example.com,http://localhost:3000")
	addr := srv.Wait(t, listening, 20*time.Second)[1]
	for origin, allowed := range map[string]bool{"https://dash.example.com": true, "http://localhost:3000": true, "https://evil.example.net": false} {
		req, _ := http.NewRequest("OPTIONS", "http://"+addr+"/api/users", nil)
		req.Header.Set("Origin", origin)
		req.Header.Set("Access-Control-Request-Method", "GET")
		req.Header.Set("Access-Control-Request-Headers", "authorization")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		got := resp.Header.Get("Access-Control-Allow-Origin")
		if allowed && (resp.StatusCode != http.StatusNoContent || got != origin) || !allowed && got != "" {
			t.Errorf("preflight from %s: %d, Allow-Origin %q", origin, resp.StatusCode, got)
		}
	}
}
