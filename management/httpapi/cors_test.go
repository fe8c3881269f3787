package httpapi_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/httpapi"
)

func TestParseOrigins(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want []string
	}{
		{nil, nil},
		{[]string{"https://dash.example.com"}, []string{"https://dash.example.com"}},
		{[]string{"https://Dash.Example.com/", "http://localhost:3000"}, []string{"https://dash.example.com", "http://localhost:3000"}},
		{[]string{"https://a.example.com, https://b.example.com:8443", "https://a.example.com"}, []string{"https://a.example.com", "https://b.example.com:8443"}},
		{[]string{"http://[::1]:3000"}, []string{"http://[::1]:3000"}},
	} {
		got, err := httpapi.ParseOrigins(c.in)
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("ParseOrigins(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"dash.example.com", "*", "https://", "ftp://dash.example.com", "https://dash.example.com/app",
		"https://user@dash.example.com", "https://dash.example.com?x=1", "https://dash.example.com#x", "https://dash.example.com:", "https://:443", "https://dash.example.com:99999"} {
		if got, err := httpapi.ParseOrigins([]string{bad}); err == nil {
			t.Errorf("ParseOrigins(%q) = %q, want an error", bad, got)
		} else if !strings.Contains(err.Error(), "scheme://host[:port]") && !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseOrigins(%q): error %q does not say what is wanted", bad, err)
		}
	}
}

// TestCORS: only configured dashboard origins get CORS headers and an
// answered preflight; other origins get none, and none by default.
func TestCORS(t *testing.T) {
	const dash, evil = "https://dash.example.com", "https://evil.example.net"
	serve := func(origins []string, method, origin string, hdr map[string]string) *http.Response {
		t.Helper()
		srv := httptest.NewServer(httpapi.New(httpapi.Options{DashboardOrigins: origins}))
		defer srv.Close()
		req, _ := http.NewRequest(method, srv.URL+"/api/users", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	preflight := map[string]string{"Access-Control-Request-Method": "PUT", "Access-Control-Request-Headers": "authorization, content-type"}

	resp := serve([]string{dash}, "OPTIONS", dash, preflight)
	h := resp.Header
	if resp.StatusCode != http.StatusNoContent || h.Get("Access-Control-Allow-Origin") != dash {
		t.Fatalf("preflight from %s: %d, Allow-Origin %q", dash, resp.StatusCode, h.Get("Access-Control-Allow-Origin"))
	}
	for _, m := range []string{"GET", "POST", "PUT", "DELETE"} {
		if !strings.Contains(h.Get("Access-Control-Allow-Methods"), m) {
			t.Errorf("Allow-Methods %q lacks %s", h.Get("Access-Control-Allow-Methods"), m)
		}
	}
	if got := h.Get("Access-Control-Allow-Headers"); !strings.Contains(got, "Authorization") || !strings.Contains(got, "Content-Type") {
		t.Errorf("Allow-Headers %q", got)
	}
	if !slices.Contains(h.Values("Vary"), "Origin") {
		t.Errorf("preflight Vary %q lacks Origin", h.Values("Vary"))
	}

	// The request itself: the dashboard's origin may read the answer
	// (a 401 without credentials, with its JSON body).
	resp = serve([]string{dash}, "GET", dash, nil)
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != dash || !slices.Contains(resp.Header.Values("Vary"), "Origin") {
		t.Errorf("GET from %s: %d, Allow-Origin %q, Vary %q", dash, resp.StatusCode, resp.Header.Get("Access-Control-Allow-Origin"), resp.Header.Values("Vary"))
	}

	// Another origin, and any origin when none is configured: no CORS
	// header, and the preflight is not answered as one.
	for _, c := range []struct {
		origins []string
		origin  string
	}{{[]string{dash}, evil}, {[]string{dash}, "https://dash.example.com.evil.example.net"}, {nil, dash}, {nil, evil}} {
		for _, method := range []string{"OPTIONS", "GET"} {
			resp := serve(c.origins, method, c.origin, preflight)
			for k := range resp.Header {
				if strings.HasPrefix(k, "Access-Control-") {
					t.Errorf("%s from %s (allowed %q): header %s: %q", method, c.origin, c.origins, k, resp.Header.Get(k))
				}
			}
			if method == "OPTIONS" && resp.StatusCode != http.StatusMethodNotAllowed {
				t.Errorf("preflight from %s (allowed %q): %d, want 405 as for any OPTIONS", c.origin, c.origins, resp.StatusCode)
			}
		}
	}
}
