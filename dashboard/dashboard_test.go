package dashboard

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/fstest"
)

var (
	indexHTML = `<!doctype html><html><head><script type="module" src="/assets/index-abc123.js"></script></head><body><div id="root"></div></body></html>`
	appJS     = strings.Repeat("console.log('wiremesh dashboard');\n", 200)
)

func app() fstest.MapFS {
	return fstest.MapFS{
		"index.html":              {Data: []byte(indexHTML)},
		"assets/index-abc123.js":  {Data: []byte(appJS)},
		"assets/index-def456.css": {Data: []byte("body{margin:0}")},
		"assets/logo-777.svg":     {Data: []byte(`<svg xmlns="http://www.w3.org/2000/svg"/>`)},
		"favicon.ico":             {Data: []byte{0, 0, 1, 0}},
		"robots.txt":              {Data: []byte("User-agent: *\nDisallow: /\n")},
	}
}

// api stands in for the REST API and the identity provider: the mux must
// send their paths to them, never to the dashboard.
func serve(t *testing.T, o Options) *httptest.Server {
	t.Helper()
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"api":true}`)
	}))
	mux.Handle("/oauth2/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "idp") }))
	mux.Handle("/", h)
	s := httptest.NewServer(mux)
	t.Cleanup(s.Close)
	return s
}

type resp struct {
	code int
	hdr  http.Header
	body string
}

func do(t *testing.T, s *httptest.Server, method, path string, hdr map[string]string) resp {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	// A bare transport: no transparent gzip, so the encoding is visible.
	r, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer r.Body.Close()
	b, _ := io.ReadAll(r.Body)
	return resp{r.StatusCode, r.Header, string(b)}
}

// TestStatic: files of the build are served with their types, assets
// cached for a year, every other GET path answered with index.html
// (revalidated), the API's and the provider's paths left to them.
func TestStatic(t *testing.T) {
	s := serve(t, Options{App: app()})
	for _, c := range []struct {
		name, method, path string
		code               int
		ctype, cache, body string
	}{
		{name: "root", method: "GET", path: "/", code: 200, ctype: "text/html; charset=utf-8", cache: "no-cache", body: indexHTML},
		{name: "index.html", method: "GET", path: "/index.html", code: 200, ctype: "text/html; charset=utf-8", cache: "no-cache", body: indexHTML},
		{name: "app route", method: "GET", path: "/peers", code: 200, ctype: "text/html; charset=utf-8", cache: "no-cache", body: indexHTML},
		{name: "deep app route", method: "GET", path: "/peers/d0g3k5/edit?x=1", code: 200, ctype: "text/html; charset=utf-8", cache: "no-cache", body: indexHTML},
		{name: "login callback", method: "GET", path: "/nb-auth?code=abc&state=s", code: 200, ctype: "text/html; charset=utf-8", cache: "no-cache", body: indexHTML},
		{name: "js", method: "GET", path: "/assets/index-abc123.js", code: 200, ctype: "text/javascript; charset=utf-8", cache: cacheImmutable, body: appJS},
		{name: "css", method: "GET", path: "/assets/index-def456.css", code: 200, ctype: "text/css; charset=utf-8", cache: cacheImmutable, body: "body{margin:0}"},
		{name: "svg", method: "GET", path: "/assets/logo-777.svg", code: 200, ctype: "image/svg+xml", cache: cacheImmutable},
		{name: "top-level file", method: "GET", path: "/robots.txt", code: 200, ctype: "text/plain; charset=utf-8", cache: "no-cache", body: "User-agent: *\nDisallow: /\n"},
		{name: "icon", method: "GET", path: "/favicon.ico", code: 200, ctype: "image/x-icon", cache: "no-cache"},
		{name: "missing asset", method: "GET", path: "/assets/index-old999.js", code: 404},
		{name: "head", method: "HEAD", path: "/assets/index-abc123.js", code: 200, ctype: "text/javascript; charset=utf-8", cache: cacheImmutable},
		{name: "head app route", method: "HEAD", path: "/setup-keys", code: 200, ctype: "text/html; charset=utf-8", cache: "no-cache"},
		{name: "post", method: "POST", path: "/peers", code: 405},
		{name: "api", method: "GET", path: "/api/peers", code: 200, ctype: "application/json", body: `{"api":true}`},
		{name: "idp", method: "GET", path: "/oauth2/authorize", code: 200, body: "idp"},
		{name: "api without slash", method: "GET", path: "/api", code: 307}, // the mux's redirect to /api/
		{name: "relay", method: "GET", path: "/relay", code: 404},
		{name: "metrics", method: "GET", path: "/metrics", code: 404},
		{name: "pprof off", method: "GET", path: "/debug/pprof/", code: 404},
		{name: "health", method: "GET", path: "/healthz", code: 404},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := do(t, s, c.method, c.path, nil)
			if r.code != c.code {
				t.Fatalf("status %d, want %d: %s", r.code, c.code, r.body)
			}
			if c.ctype != "" && r.hdr.Get("Content-Type") != c.ctype {
				t.Errorf("Content-Type %q, want %q", r.hdr.Get("Content-Type"), c.ctype)
			}
			if c.cache != "" && r.hdr.Get("Cache-Control") != c.cache {
				t.Errorf("Cache-Control %q, want %q", r.hdr.Get("Cache-Control"), c.cache)
			}
			if c.body != "" && r.body != c.body {
				t.Errorf("body %.80q, want %.80q", r.body, c.body)
			}
			if c.method == "HEAD" && (r.body != "" || r.hdr.Get("Content-Length") == "" || r.hdr.Get("Content-Length") == "0") {
				t.Errorf("HEAD: body %q, Content-Length %q", r.body, r.hdr.Get("Content-Length"))
			}
			if c.code == 405 && r.hdr.Get("Allow") != "GET, HEAD" {
				t.Errorf("Allow %q", r.hdr.Get("Allow"))
			}
		})
	}
}

// TestUncleanPaths: paths the mux did not clean (the handler mounted
// elsewhere) never leave the build nor reach a reserved prefix's neighbour.
func TestUncleanPaths(t *testing.T) {
	h, err := New(Options{App: app()})
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]int{"/assets/../../etc/passwd": 200, "/api": 404, "/./assets/index-abc123.js": 200} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "/", nil)
		req.URL.Path = p
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("%s: %d, want %d", p, rec.Code, want)
		}
		if p == "/assets/../../etc/passwd" && rec.Body.String() != indexHTML {
			t.Errorf("%s: %.80q, want index.html", p, rec.Body.String())
		}
	}
}

// TestHTMLHeaders: the app's page may not be framed by other sites, and
// no response is type-sniffed.
func TestHTMLHeaders(t *testing.T) {
	s := serve(t, Options{App: app()})
	r := do(t, s, "GET", "/peers", nil)
	if r.hdr.Get("X-Frame-Options") != "DENY" || r.hdr.Get("Content-Security-Policy") != "frame-ancestors 'none'" {
		t.Errorf("framing headers %q %q", r.hdr.Get("X-Frame-Options"), r.hdr.Get("Content-Security-Policy"))
	}
	if r := do(t, s, "GET", "/assets/index-abc123.js", nil); r.hdr.Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("X-Content-Type-Options %q", r.hdr.Get("X-Content-Type-Options"))
	}
}

// TestGzipAndETag: large text files go gzipped to clients that accept it
// (Vary says so), and a revalidation with the ETag answers 304.
func TestGzipAndETag(t *testing.T) {
	s := serve(t, Options{App: app()})
	r := do(t, s, "GET", "/assets/index-abc123.js", map[string]string{"Accept-Encoding": "br, gzip"})
	if r.hdr.Get("Content-Encoding") != "gzip" || r.hdr.Get("Vary") != "Accept-Encoding" {
		t.Fatalf("Content-Encoding %q, Vary %q", r.hdr.Get("Content-Encoding"), r.hdr.Get("Vary"))
	}
	zr, err := gzip.NewReader(strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if string(plain) != appJS || len(r.body) >= len(appJS) {
		t.Fatalf("gzipped body: %d bytes for %d, decodes to %d bytes", len(r.body), len(appJS), len(plain))
	}
	for _, ae := range []string{"", "identity", "gzip;q=0", "br"} {
		if r := do(t, s, "GET", "/assets/index-abc123.js", map[string]string{"Accept-Encoding": ae}); r.hdr.Get("Content-Encoding") != "" || r.body != appJS {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, %d bytes", ae, r.hdr.Get("Content-Encoding"), len(r.body))
		}
	}
	plainTag := do(t, s, "GET", "/assets/index-abc123.js", nil).hdr.Get("ETag")
	if plainTag == "" || plainTag == r.hdr.Get("ETag") {
		t.Fatalf("ETags plain %q gzip %q: want two different ones", plainTag, r.hdr.Get("ETag"))
	}
	if got := do(t, s, "GET", "/assets/index-abc123.js", map[string]string{"If-None-Match": plainTag}); got.code != http.StatusNotModified {
		t.Errorf("revalidation: %d, want 304", got.code)
	}
	idx := do(t, s, "GET", "/peers", nil)
	if got := do(t, s, "GET", "/setup-keys", map[string]string{"If-None-Match": idx.hdr.Get("ETag")}); got.code != http.StatusNotModified {
		t.Errorf("index revalidation: %d, want 304", got.code)
	}
}

// TestConfig: /dashboard-config.json carries the login settings, never
// cached; without a login configured it says which flags set one.
func TestConfig(t *testing.T) {
	want := Config{Issuer: "https://vpn.example.com/oauth2", ClientID: "netbird-dashboard", Audience: "netbird-dashboard"}
	s := serve(t, Options{App: app(), Config: &want})
	r := do(t, s, "GET", ConfigPath, nil)
	var got Config
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || r.code != 200 || got != want {
		t.Fatalf("%d %s (%v), want %+v", r.code, r.body, err, want)
	}
	if r.hdr.Get("Content-Type") != "application/json" || r.hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", r.hdr)
	}
	if !strings.Contains(r.body, `"client_id":"netbird-dashboard"`) {
		t.Errorf("field names: %s", r.body)
	}
	if r := do(t, s, "POST", ConfigPath, nil); r.code != 405 {
		t.Errorf("POST: %d", r.code)
	}
	none := serve(t, Options{App: app()})
	r = do(t, none, "GET", ConfigPath, nil)
	var e struct {
		Message string
		Code    int
	}
	if err := json.Unmarshal([]byte(r.body), &e); err != nil || r.code != 404 || e.Code != 404 || !strings.Contains(e.Message, "--oidc-issuer") {
		t.Fatalf("no login: %d %s", r.code, r.body)
	}
}

// TestReserved: a custom issuer path is left to the provider too.
func TestReserved(t *testing.T) {
	s := serve(t, Options{App: app(), Reserved: []string{"/idp/"}})
	if r := do(t, s, "GET", "/idp/authorize", nil); r.code != 404 {
		t.Errorf("/idp/authorize: %d %s", r.code, r.body)
	}
	if r := do(t, s, "GET", "/idpx", nil); r.code != 200 || r.body != indexHTML {
		t.Errorf("/idpx: %d", r.code)
	}
}

// TestWithoutBuild: a binary built without the dashboard answers every
// page with how to build it, and still serves the settings.
func TestWithoutBuild(t *testing.T) {
	s := serve(t, Options{Config: &Config{Issuer: "http://x/oauth2", ClientID: "c", Audience: "c"}})
	for _, p := range []string{"/", "/peers"} {
		r := do(t, s, "GET", p, nil)
		if r.code != 200 || !strings.Contains(r.body, "make build") || !strings.Contains(r.body, "npm ci &amp;&amp; npm run build") ||
			!strings.Contains(r.body, "-tags dashboard") || r.hdr.Get("Content-Type") != "text/html; charset=utf-8" {
			t.Fatalf("%s: %d %s", p, r.code, r.body)
		}
	}
	if r := do(t, s, "GET", ConfigPath, nil); r.code != 200 {
		t.Errorf("config: %d", r.code)
	}
	if r := do(t, s, "GET", "/api/peers", nil); r.body != `{"api":true}` {
		t.Errorf("api shadowed: %s", r.body)
	}
}

// TestNoIndex: a build without index.html is refused at start.
func TestNoIndex(t *testing.T) {
	if _, err := New(Options{App: fstest.MapFS{"assets/a.js": {Data: []byte("x")}}}); err == nil {
		t.Fatal("accepted a build without index.html")
	}
}

// TestEmbedded: the binary's own build, when it has one, is a servable app.
func TestEmbedded(t *testing.T) {
	a := Embedded()
	if a == nil {
		t.Skip("built without the dashboard tag")
	}
	s := serve(t, Options{App: a})
	r := do(t, s, "GET", "/", nil)
	if r.code != 200 || !bytes.Contains([]byte(r.body), []byte(`<div id="root">`)) {
		t.Fatalf("%d %.200s", r.code, r.body)
	}
}
