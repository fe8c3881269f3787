package agentinstall

import (
	"bytes"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
)

// buildAgent builds the real agent into dir under its download name.
func buildAgent(t *testing.T, dir string) string {
	t.Helper()
	name := FileName(runtime.GOOS, runtime.GOARCH)
	cmd := exec.Command("go", "build", "-o", filepath.Join(dir, name), "./client/cmd/netbird")
	cmd.Dir = filepath.Join("..", "..")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build agent: %v\n%s", err, out)
	}
	return name
}

// install runs the served script as a user would (curl | sh) into a
// temporary directory without a service, and returns its output.
func install(t *testing.T, base, into string) (string, error) {
	t.Helper()
	cmd := exec.Command("sh", "-c", `curl -fsSL "$1/install.sh" | sh`, "sh", base)
	cmd.Env = append(os.Environ(), "NB_INSTALL_DIR="+into, "NB_NO_SERVICE=1")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mounted is a mux with a handler for o (in a fresh directory) mounted.
func mounted(t *testing.T, o Options) *http.ServeMux {
	t.Helper()
	o.Dir = t.TempDir()
	h, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Mount(mux)
	return mux
}

// needScriptTools skips where install.sh does not run (not unix) and
// fails where the tools running it are missing.
func needScriptTools(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		t.Skip("install.sh is for unix")
	}
	for _, tool := range []string{"curl", "sh"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed (scripts/deps.sh installs it): %v", tool, err)
		}
	}
}

func TestInstallScriptEndToEnd(t *testing.T) {
	needScriptTools(t)
	agents := t.TempDir()
	name := buildAgent(t, agents)
	h, err := New(Options{Dir: agents})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Mount(mux)

	// tamper flips one byte of the agent on its way to the client, as a
	// broken mirror or an attacker on a plaintext path would.
	var tamper atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tamper.Load() && r.URL.Path == "/download/"+name {
			b, err := os.ReadFile(filepath.Join(agents, name))
			if err != nil {
				t.Error(err)
				return
			}
			b[len(b)/2] ^= 0xff
			_, _ = w.Write(b)
			return
		}
		mux.ServeHTTP(w, r)
	}))
	defer srv.Close()

	t.Run("installs and runs", func(t *testing.T) {
		into := filepath.Join(t.TempDir(), "bin")
		out, err := install(t, srv.URL, into)
		if err != nil {
			t.Fatalf("install.sh: %v\n%s", err, out)
		}
		if want := "netbird up --management-url " + srv.URL; !strings.Contains(out, want) {
			t.Errorf("install.sh output lacks %q:\n%s", want, out)
		}
		v, err := exec.Command(filepath.Join(into, "netbird"), "version").CombinedOutput()
		if err != nil || len(bytes.TrimSpace(v)) == 0 {
			t.Fatalf("installed netbird version: %v\n%s", err, v)
		}
	})
	t.Run("tampered binary refused", func(t *testing.T) {
		tamper.Store(true)
		defer tamper.Store(false)
		into := filepath.Join(t.TempDir(), "bin")
		out, err := install(t, srv.URL, into)
		if err == nil {
			t.Fatalf("install.sh accepted a tampered binary:\n%s", out)
		}
		if !strings.Contains(out, "checksum mismatch for "+name) {
			t.Errorf("output does not name the checksum mismatch:\n%s", out)
		}
		if _, err := os.Stat(filepath.Join(into, "netbird")); err == nil {
			t.Error("tampered binary was installed")
		}
	})
	t.Run("no agent for the platform", func(t *testing.T) {
		empty, err := New(Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		m := http.NewServeMux()
		empty.Mount(m)
		s := httptest.NewServer(m)
		defer s.Close()
		out, err := install(t, s.URL, filepath.Join(t.TempDir(), "bin"))
		if err == nil {
			t.Fatalf("install.sh succeeded without agents:\n%s", out)
		}
		if !strings.Contains(out, "make agents") {
			t.Errorf("output does not say how to provide agents:\n%s", out)
		}
	})
}

func TestDownloadRoutes(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "netbird-linux-amd64"), []byte("agent"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "secret.txt"), []byte("no"), 0o600); err != nil {
		t.Fatal(err)
	}
	h, err := New(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	h.Mount(mux)
	for _, tc := range []struct {
		path, host, proto string
		code              int
		body              string
	}{
		{path: "/download/netbird-linux-amd64", code: 200, body: "agent"},
		{path: "/download/SHA256SUMS", code: 200, body: "  netbird-linux-amd64\n"},
		{path: "/download/netbird-linux-arm64", code: 404, body: "this server has no agent for linux/arm64: build it with `make agents` and copy bin/agents to --agent-dir"},
		{path: "/download/netbird-windows-amd64.exe", code: 404, body: "no agent for windows/amd64"},
		{path: "/download/secret.txt", code: 404, body: "agents are netbird-<os>-<arch>"},
		{path: "/download/..%2fsecret.txt", code: 404},
		{path: "/install.sh", host: "vpn.example.com", proto: "https", code: 200, body: "SERVER='https://vpn.example.com'"},
		{path: "/install.sh", host: "10.0.0.1:33073", code: 200, body: "SERVER='http://10.0.0.1:33073'"},
		{path: "/install.sh", host: "evil';rm -rf /;'", code: 400},
	} {
		req := httptest.NewRequest("GET", "http://x"+tc.path, nil)
		req.RemoteAddr = "127.0.0.1:40000" // plaintext install.sh goes to loopback only
		if tc.host != "" {
			req.Host = tc.host
		}
		if tc.proto != "" {
			req.Header.Set("X-Forwarded-Proto", tc.proto)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != tc.code || !strings.Contains(rec.Body.String(), tc.body) {
			t.Errorf("GET %s (host %q): got %d %q, want %d containing %q", tc.path, tc.host, rec.Code, rec.Body.String(), tc.code, tc.body)
		}
	}
}

func TestPublicAddressWinsAndIsChecked(t *testing.T) {
	for _, tc := range []struct {
		o    Options
		want string
	}{
		{o: Options{PublicHost: "vpn.example.com", PublicPort: 8443, TLS: true}, want: "https://vpn.example.com:8443"},
		{o: Options{PublicHost: "vpn.example.com", PublicPort: 443, TLS: true}, want: "https://vpn.example.com"},
		{o: Options{PublicHost: "2001:db8::1", PublicPort: 80}, want: "http://[2001:db8::1]"},
		{o: Options{PublicHost: "203.0.113.1", PublicPort: 33073}, want: "http://203.0.113.1:33073"},
		{o: Options{TLS: true}, want: "https://127.0.0.1:9"}, // no public host: the request's, over TLS
	} {
		mux := mounted(t, tc.o)
		rec := httptest.NewRecorder()
		req := httptest.NewRequest("GET", "http://127.0.0.1:9/install.sh", nil)
		req.RemoteAddr = "127.0.0.1:40000" // plaintext install.sh goes to loopback only
		mux.ServeHTTP(rec, req)
		if !strings.Contains(rec.Body.String(), "SERVER='"+tc.want+"'") {
			t.Errorf("%+v: script does not name %s:\n%s", tc.o, tc.want, rec.Body.String())
		}
	}
	for _, bad := range []string{"a'b", "x y", "$(id)"} {
		if _, err := New(Options{Dir: "d", PublicHost: bad}); err == nil {
			t.Errorf("New accepted public host %q", bad)
		}
	}
	if _, err := New(Options{}); err == nil || !strings.Contains(err.Error(), "--agent-dir") {
		t.Errorf("empty dir: got %v, want an error naming --agent-dir", err)
	}
}

// TestScriptShellcheck runs shellcheck on the script as served.
func TestScriptShellcheck(t *testing.T) {
	sc, err := exec.LookPath("shellcheck")
	if err != nil {
		t.Fatalf("shellcheck is needed (scripts/deps.sh installs it): %v", err)
	}
	u, _ := url.Parse("https://vpn.wiremesh.test")
	b, err := Script(u)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "install.sh")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(sc, p).CombinedOutput(); err != nil {
		t.Fatalf("shellcheck install.sh: %v\n%s", err, out)
	}
}

// TestPlaintextScriptRefused: a script naming an http:// server goes to
// loopback clients only, unless the operator accepts plaintext.
func TestPlaintextScriptRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		o      Options
		remote string
		hdr    string
		code   int
	}{
		{name: "plaintext to another host", remote: "192.0.2.5:40000", code: http.StatusForbidden},
		{name: "plaintext to a mapped v4 host", remote: "[::ffff:192.0.2.5]:40000", code: http.StatusForbidden},
		{name: "plaintext to loopback", remote: "127.0.0.1:40000", code: http.StatusOK},
		{name: "plaintext to v6 loopback", remote: "[::1]:40000", code: http.StatusOK},
		{name: "plaintext accepted", o: Options{AllowPlaintext: true}, remote: "192.0.2.5:40000", code: http.StatusOK},
		{name: "https public URL", o: Options{PublicHost: "vpn.example.com", TLS: true}, remote: "192.0.2.5:40000", code: http.StatusOK},
		{name: "https by the proxy", remote: "192.0.2.5:40000", hdr: "https", code: http.StatusOK},
		{name: "http public URL", o: Options{PublicHost: "vpn.example.com", PublicPort: 33073}, remote: "192.0.2.5:40000", code: http.StatusForbidden},
	} {
		mux := mounted(t, tc.o)
		req := httptest.NewRequest("GET", "http://vpn.example.com:33073/install.sh", nil)
		req.RemoteAddr = tc.remote
		if tc.hdr != "" {
			req.Header.Set("X-Forwarded-Proto", tc.hdr)
		}
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		if rec.Code != tc.code {
			t.Errorf("%s: %d %q, want %d", tc.name, rec.Code, rec.Body.String(), tc.code)
		}
		if tc.code == http.StatusForbidden && !strings.Contains(rec.Body.String(), InsecureFlag) {
			t.Errorf("%s: refusal %q does not name %s", tc.name, rec.Body.String(), InsecureFlag)
		}
	}
}

// TestScriptNoDowngrade: from an https server, the script's downloads do
// not follow a redirect to http (where anyone on the path could answer).
func TestScriptNoDowngrade(t *testing.T) {
	needScriptTools(t)
	var plainHits atomic.Int32
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		plainHits.Add(1)
		_, _ = w.Write([]byte("0000  netbird-linux-amd64\n"))
	}))
	defer plain.Close()
	var h *Handler
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/install.sh" {
			h.serveScript(w, r)
			return
		}
		http.Redirect(w, r, plain.URL+r.URL.Path, http.StatusFound)
	}))
	defer srv.Close()
	var err error
	if h, err = New(Options{Dir: t.TempDir(), TLS: true}); err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", `curl -fsSL "$1/install.sh" | sh`, "sh", srv.URL)
	cmd.Env = append(os.Environ(), "NB_INSTALL_DIR="+t.TempDir(), "NB_NO_SERVICE=1", "CURL_CA_BUNDLE="+ca)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("install.sh succeeded through an https->http redirect:\n%s", out)
	}
	if !strings.Contains(string(out), "Downloading") {
		t.Fatalf("the script did not run (CA not trusted?):\n%s", out)
	}
	if n := plainHits.Load(); n != 0 {
		t.Fatalf("the script followed the redirect to http %d times:\n%s", n, out)
	}
}
