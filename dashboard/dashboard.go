// Package dashboard serves the web app (the Vite build in dist/, embedded
// into the binary when built with the `dashboard` tag) and its login
// settings, /dashboard-config.json, on the server's own origin. It does
// not serve the REST API or the identity provider: those keep their own
// paths (/api/, /oauth2/...), which it never answers with the app.
//
// Paths: a file of the build is served as is (files under /assets/ carry
// content hashes in their names and are cached for a year); any other GET
// is answered with index.html, so the app's own routes (/peers,
// /nb-auth...) survive a reload. A binary built without the tag answers
// with a page that says how to build the dashboard into it.
package dashboard

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

// ConfigPath is where the app reads its login settings.
const ConfigPath = "/dashboard-config.json"

// Config is the app's login settings (dashboard/src/auth/config.ts).
type Config struct {
	// Issuer is the OpenID Connect issuer the app logs in with.
	Issuer string `json:"issuer"`
	// ClientID is the app's public client at the issuer.
	ClientID string `json:"client_id"`
	// Audience is the audience the server accepts in access tokens.
	Audience string `json:"audience"`
}

// Options configure the handler.
type Options struct {
	// App is the built app (nil: the build instructions page). Use
	// Embedded() for the one built into this binary.
	App fs.FS
	// Config is served at ConfigPath; nil answers 404 naming the flags
	// that configure a login (no identity provider is configured).
	Config *Config
	// Reserved are further path prefixes that belong to other handlers
	// (the identity provider's path when it is not /oauth2): they are
	// never answered with the app.
	Reserved []string
}

// reserved belong to the server's other handlers, whatever the build.
var reserved = []string{"/api", "/oauth2", "/relay", "/debug", "/metrics", "/healthz"}

const (
	cacheImmutable  = "public, max-age=31536000, immutable"
	cacheRevalidate = "no-cache"
)

// file is one file of the build, held in memory with its gzip form.
type file struct {
	name  string
	body  []byte
	gz    []byte // nil: not worth compressing
	ctype string
	etag  string
}

// Handler serves the app and its settings.
type Handler struct {
	files    map[string]*file // by path without the leading slash
	index    *file
	config   []byte // nil: none
	reserved []string
}

// New reads the build into memory (it is small: a few MB) and compresses
// what is worth compressing once, so requests only copy bytes.
func New(o Options) (*Handler, error) {
	h := &Handler{files: map[string]*file{}, reserved: reserved}
	for _, r := range o.Reserved {
		if r = strings.TrimSuffix(r, "/"); r != "" {
			h.reserved = append(h.reserved, r)
		}
	}
	if o.Config != nil {
		b, err := json.Marshal(o.Config)
		if err != nil {
			return nil, fmt.Errorf("dashboard config: %w", err)
		}
		h.config = b
	}
	if o.App == nil {
		h.index = newFile("index.html", []byte(buildPage))
		return h, nil
	}
	err := fs.WalkDir(o.App, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(o.App, p)
		if err != nil {
			return err
		}
		h.files[p] = newFile(p, b)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard build: %w", err)
	}
	if h.index = h.files["index.html"]; h.index == nil {
		return nil, fmt.Errorf("dashboard build: no index.html (run npm run build in dashboard/)")
	}
	return h, nil
}

func newFile(name string, b []byte) *file {
	sum := sha256.Sum256(b)
	f := &file{name: name, body: b, ctype: contentType(name), etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
	if compressible(f.ctype) && len(b) >= 1024 {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		_, _ = zw.Write(b)
		_ = zw.Close()
		if buf.Len() < len(b)*9/10 {
			f.gz = buf.Bytes()
		}
	}
	return f
}

// types the standard library (or the host's mime.types) may not know.
var types = map[string]string{
	".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
	".css": "text/css; charset=utf-8", ".json": "application/json", ".map": "application/json", ".svg": "image/svg+xml",
	".png": "image/png", ".ico": "image/x-icon", ".webp": "image/webp", ".woff2": "font/woff2", ".woff": "font/woff",
	".ttf": "font/ttf", ".txt": "text/plain; charset=utf-8", ".webmanifest": "application/manifest+json", ".wasm": "application/wasm",
}

func contentType(name string) string {
	ext := strings.ToLower(path.Ext(name))
	if t, ok := types[ext]; ok {
		return t
	}
	if t := mime.TypeByExtension(ext); t != "" {
		return t
	}
	return "application/octet-stream"
}

func compressible(ctype string) bool {
	return strings.HasPrefix(ctype, "text/") || strings.Contains(ctype, "json") || strings.Contains(ctype, "svg") ||
		strings.Contains(ctype, "javascript") || ctype == "application/wasm" || ctype == "font/ttf"
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.Path
	if p == ConfigPath {
		h.serveConfig(w, r)
		return
	}
	for _, pre := range h.reserved {
		if p == pre || strings.HasPrefix(p, pre+"/") {
			jsonError(w, http.StatusNotFound, "no such endpoint: "+p)
			return
		}
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		jsonError(w, http.StatusMethodNotAllowed, "the dashboard answers GET and HEAD only")
		return
	}
	name := strings.TrimPrefix(path.Clean("/"+p), "/")
	f := h.files[name]
	cache := cacheRevalidate
	switch {
	case f != nil && strings.HasPrefix(name, "assets/"):
		cache = cacheImmutable
	case f != nil && name != "index.html":
	case strings.HasPrefix(name, "assets/"):
		// A build's asset that is gone (the page was loaded before an
		// upgrade): index.html in its place would be cached as code.
		http.Error(w, "no such file in this dashboard build: "+p, http.StatusNotFound)
		return
	default:
		f = h.index
		// The app's HTML: no framing by other sites (clickjacking).
		w.Header().Set("X-Frame-Options", "DENY")
		w.Header().Set("Content-Security-Policy", "frame-ancestors 'none'")
	}
	h.serve(w, r, f, cache)
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request, f *file, cache string) {
	hd := w.Header()
	hd.Set("Content-Type", f.ctype)
	hd.Set("Cache-Control", cache)
	hd.Set("X-Content-Type-Options", "nosniff")
	body, etag := f.body, f.etag
	if f.gz != nil {
		hd.Add("Vary", "Accept-Encoding")
		if acceptsGzip(r.Header.Get("Accept-Encoding")) {
			hd.Set("Content-Encoding", "gzip")
			body, etag = f.gz, strings.TrimSuffix(f.etag, `"`)+`-gz"`
		}
	}
	hd.Set("ETag", etag)
	// ServeContent answers HEAD, If-None-Match (304) and ranges.
	http.ServeContent(w, r, f.name, time.Time{}, bytes.NewReader(body))
}

func (h *Handler) serveConfig(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		jsonError(w, http.StatusMethodNotAllowed, "GET or HEAD only")
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	if h.config == nil {
		jsonError(w, http.StatusNotFound, "no login is configured: start the server with the built-in identity provider "+
			"(--builtin-idp) or an external one (--oidc-issuer, --oidc-client-id, --dashboard-client-id)")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(h.config)))
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(h.config)
}

// acceptsGzip reports whether an Accept-Encoding value allows gzip.
func acceptsGzip(v string) bool {
	for _, part := range strings.Split(v, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		coding = strings.ToLower(strings.TrimSpace(coding))
		if coding != "gzip" && coding != "*" {
			continue
		}
		q := strings.ReplaceAll(strings.ToLower(params), " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}

func jsonError(w http.ResponseWriter, code int, msg string) {
	b, _ := json.Marshal(map[string]any{"message": msg, "code": code})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// buildPage is served by a binary built without the dashboard.
const buildPage = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>wiremesh: dashboard not built in</title>
<style>body{font:16px/1.5 system-ui,sans-serif;max-width:44rem;margin:3rem auto;padding:0 1rem}
pre{background:#f3f3f3;padding:.75rem;overflow:auto}@media (prefers-color-scheme:dark){body{background:#1a1b1e;color:#ddd}pre{background:#2c2e33}}</style>
</head>
<body>
<h1>The dashboard is not built into this server</h1>
<p>This binary was built without the web dashboard. The REST API (<code>/api/</code>) and everything else work as usual.</p>
<p>To build the server with the dashboard (needs Node.js 20.19 or later and npm), from the source tree:</p>
<pre>make build          # builds dashboard/dist, then bin/netbird-server with it</pre>
<p>or step by step:</p>
<pre>cd dashboard &amp;&amp; npm ci &amp;&amp; npm run build &amp;&amp; cd ..
go build -tags dashboard -o bin/netbird-server ./cmd/netbird-server</pre>
<p>The dashboard can also run as its own container next to the server: see <code>dashboard/Dockerfile</code>.</p>
</body>
</html>
`
