// Package agentinstall serves the one-line agent install: GET /install.sh
// (a POSIX shell script naming this server's public URL) and the agent
// binaries under /download/ (netbird-<goos>-<goarch>, plus SHA256SUMS the
// script verifies). The binaries come from a directory filled by
// `make agents`; this package neither builds nor signs them.
package agentinstall

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
)

// DefaultDir is where packaged agents live on a server host.
const DefaultDir = "/usr/share/wiremesh/agents"

// Platforms are the goos/goarch pairs `make agents` builds; the script
// asks for one of the unix ones.
var Platforms = []string{"linux/amd64", "linux/arm64", "linux/arm", "darwin/amd64", "darwin/arm64", "windows/amd64"}

// agentName matches the only file names /download/ serves, so no request
// path can leave the directory.
var agentName = regexp.MustCompile(`^netbird-(linux|darwin|windows)-(amd64|arm64|arm)(\.exe)?$`)

// Flags are the command-line settings of the agent install.
type Flags struct {
	// Dir is --agent-dir.
	Dir string
	// AllowPlaintext is --agent-install-insecure: serve install.sh over
	// plain http to other hosts.
	AllowPlaintext bool
}

// InsecureFlag is the flag serving install.sh over plain http to hosts
// other than this one.
const InsecureFlag = "--agent-install-insecure"

// Bind registers --agent-dir and --agent-install-insecure on fs.
func Bind(fs *pflag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Dir, "agent-dir", DefaultDir, "directory of agent binaries netbird-<os>-<arch> (from `make agents`) that GET /install.sh installs from this server")
	fs.BoolVar(&f.AllowPlaintext, "agent-install-insecure", false, "serve GET /install.sh to other hosts over plain http (anyone on the path can swap the script, the agent and its SHA256SUMS; without it a plaintext install.sh is served to this host only)")
	return f
}

// Options configure a Handler.
type Options struct {
	// Dir holds netbird-<goos>-<goarch>[.exe].
	Dir string
	// PublicHost and PublicPort are where agents reach this server
	// (--public-address, --domain, --public-url); with no PublicHost the
	// script names the host each request came to (its Host header).
	PublicHost string
	PublicPort int
	// TLS: agents reach this server over https (TLS terminated here, where
	// the connection dispatcher leaves http.Request.TLS unset, or by a
	// proxy in front). Without it a request's own TLS or X-Forwarded-Proto
	// decides.
	TLS bool
	// AllowPlaintext serves a script naming an http:// server to other
	// hosts; without it only loopback clients get one, as a script and
	// agent fetched over plaintext from elsewhere are whatever anyone on
	// the path wants them to be (SHA256SUMS travels the same way).
	AllowPlaintext bool
	Log            *slog.Logger
}

// BaseURL is scheme://host[:port] of a server at host and port (0: the
// scheme's default), https when tls; the port is left out when it is the
// scheme's default, an IPv6 host is bracketed.
func BaseURL(host string, port int, tls bool) string {
	scheme, def := "http", 80
	if tls {
		scheme, def = "https", 443
	}
	if port == 0 || port == def {
		if strings.Contains(host, ":") {
			return scheme + "://[" + host + "]"
		}
		return scheme + "://" + host
	}
	return scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port))
}

// Handler serves /install.sh and /download/.
type Handler struct {
	dir       string
	public    *url.URL
	tls       bool
	plaintext bool // AllowPlaintext
	log       *slog.Logger

	mu   sync.Mutex
	sums map[string]fileSum // by file name, recomputed when size or mtime change
}

type fileSum struct {
	size  int64
	mtime time.Time
	sum   string
}

// New checks o and returns a Handler. A missing directory is not an error
// (the server still runs; the script then reports what is missing).
func New(o Options) (*Handler, error) {
	if o.Dir == "" {
		return nil, errors.New("--agent-dir: empty")
	}
	var public *url.URL
	if o.PublicHost != "" {
		var err error
		if public, err = url.Parse(BaseURL(o.PublicHost, o.PublicPort, o.TLS)); err != nil {
			return nil, fmt.Errorf("agent install public address %q: %w", o.PublicHost, err)
		}
		if err := checkBase(public); err != nil {
			return nil, fmt.Errorf("agent install public address: %w", err)
		}
	}
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Handler{dir: o.Dir, public: public, tls: o.TLS, plaintext: o.AllowPlaintext, log: log, sums: map[string]fileSum{}}, nil
}

// Mount registers the routes on mux.
func (h *Handler) Mount(mux *http.ServeMux) {
	mux.HandleFunc("GET /install.sh", h.serveScript)
	mux.HandleFunc("GET /download/SHA256SUMS", h.serveSums)
	mux.HandleFunc("GET /download/{name}", h.serveAgent)
}

// hostChars is what a Host header may hold to be embedded in the script:
// names, IPv4, bracketed IPv6 and a port. Nothing a shell would interpret.
var hostChars = regexp.MustCompile(`^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:[0-9]{1,5})?$`)

func checkBase(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%q: scheme must be http or https", u.String())
	}
	if !hostChars.MatchString(u.Host) {
		return fmt.Errorf("%q: not a plain host[:port]", u.String())
	}
	if u.Path != "" && u.Path != "/" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q: want scheme://host[:port] only", u.String())
	}
	return nil
}

// base is the URL the script downloads from and hands to `netbird up`.
func (h *Handler) base(r *http.Request) (string, error) {
	if h.public != nil {
		return h.public.Scheme + "://" + h.public.Host, nil
	}
	scheme := "http"
	if h.tls || r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https") {
		scheme = "https"
	}
	if !hostChars.MatchString(r.Host) {
		return "", fmt.Errorf("host %q is not a plain host[:port]", r.Host)
	}
	return scheme + "://" + r.Host, nil
}

func (h *Handler) serveScript(w http.ResponseWriter, r *http.Request) {
	base, err := h.base(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if strings.HasPrefix(base, "http://") && !h.plaintext && !fromLoopback(r) {
		http.Error(w, "install.sh is not served over plain http to other hosts: the script, the agent and its checksums would all be whatever anyone on the path makes them. "+
			"Serve https (--domain, --tls-cert-file, or a TLS proxy with --public-url https://...), or start the server with "+InsecureFlag+" to accept that\n", http.StatusForbidden)
		return
	}
	var b bytes.Buffer
	if err := script.Execute(&b, scriptData{URL: base}); err != nil {
		http.Error(w, "render install.sh: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/x-shellscript; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b.Bytes())
}

// fromLoopback reports whether r came from this host.
func fromLoopback(r *http.Request) bool {
	ap, err := netip.ParseAddrPort(r.RemoteAddr)
	return err == nil && ap.Addr().Unmap().IsLoopback()
}

// Script renders install.sh for base (scheme://host[:port]), as served.
func Script(base *url.URL) ([]byte, error) {
	if err := checkBase(base); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	err := script.Execute(&b, scriptData{URL: base.Scheme + "://" + base.Host})
	return b.Bytes(), err
}

func missingMessage(name string) string {
	platform := strings.TrimSuffix(strings.TrimPrefix(name, "netbird-"), ".exe")
	platform = strings.Replace(platform, "-", "/", 1)
	return fmt.Sprintf("this server has no agent for %s: build it with `make agents` and copy bin/agents to --agent-dir\n", platform)
}

func (h *Handler) serveAgent(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("name")
	if !agentName.MatchString(name) {
		http.Error(w, fmt.Sprintf("no such download %q: agents are netbird-<os>-<arch>", name), http.StatusNotFound)
		return
	}
	root, err := os.OpenRoot(h.dir)
	if err != nil {
		h.log.Warn("agent download: agent directory", "dir", h.dir, "err", err)
		http.Error(w, missingMessage(name), http.StatusNotFound)
		return
	}
	defer root.Close()
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, missingMessage(name), http.StatusNotFound)
		return
	}
	if err != nil {
		h.log.Warn("agent download", "file", name, "err", err)
		http.Error(w, "cannot open "+name, http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.Error(w, missingMessage(name), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	http.ServeContent(w, r, name, st.ModTime(), f)
}

func (h *Handler) serveSums(w http.ResponseWriter, _ *http.Request) {
	sums, err := h.Sums()
	if err != nil {
		h.log.Warn("agent checksums", "dir", h.dir, "err", err)
		http.Error(w, fmt.Sprintf("no agents on this server (--agent-dir %s): build them with `make agents` and copy bin/agents there\n", h.dir), http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = io.WriteString(w, sums)
}

// Sums returns SHA256SUMS for the agents in the directory, in the format
// of sha256sum(1). Digests are cached until a file's size or mtime change.
func (h *Handler) Sums() (string, error) {
	entries, err := os.ReadDir(h.dir)
	if err != nil {
		return "", err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	var lines []string
	seen := map[string]bool{}
	for _, e := range entries {
		if !agentName.MatchString(e.Name()) || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return "", err
		}
		seen[e.Name()] = true
		c, ok := h.sums[e.Name()]
		if !ok || c.size != info.Size() || !c.mtime.Equal(info.ModTime()) {
			sum, err := digest(h.dir, e.Name())
			if err != nil {
				return "", err
			}
			c = fileSum{size: info.Size(), mtime: info.ModTime(), sum: sum}
			h.sums[e.Name()] = c
		}
		lines = append(lines, c.sum+"  "+e.Name()+"\n")
	}
	for n := range h.sums {
		if !seen[n] {
			delete(h.sums, n)
		}
	}
	if len(lines) == 0 {
		return "", fmt.Errorf("no netbird-<os>-<arch> files in %s", h.dir)
	}
	sort.Strings(lines)
	return strings.Join(lines, ""), nil
}

func digest(dir, name string) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	s := sha256.New()
	if _, err := io.Copy(s, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", name, err)
	}
	return hex.EncodeToString(s.Sum(nil)), nil
}

// FileName is the download name of the agent for goos/goarch.
func FileName(goos, goarch string) string {
	n := "netbird-" + goos + "-" + goarch
	if goos == "windows" {
		n += ".exe"
	}
	return n
}

// Supported reports whether goos/goarch is one `make agents` builds.
func Supported(goos, goarch string) bool {
	return slices.Contains(Platforms, goos+"/"+goarch)
}
