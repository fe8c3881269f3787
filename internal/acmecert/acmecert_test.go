package acmecert_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/acmecert"
	"github.com/wiremesh/wiremesh/internal/testacme"
)

const domain = "vpn.wiremesh.test"

func TestValidDomain(t *testing.T) {
	for _, tc := range []struct {
		name string
		ok   bool
	}{
		{"vpn.example.com", true},
		{"a-b.example.co.uk", true},
		{"", false},
		{"192.0.2.1", false},
		{"2001:db8::1", false},
		{"[2001:db8::1]", false},
		{"localhost", false},
		{"vpn.example.com:443", false},
		{"https://vpn.example.com", false},
		{"*.example.com", false},
		{"-a.example.com", false},
		{"a..example.com", false},
		{"vpn_1.example.com", false},
		{"vpn.example.com.", false}, // clients send SNI without the dot: never issued
		{".example.com", false},
	} {
		err := acmecert.ValidDomain(tc.name)
		if (err == nil) != tc.ok {
			t.Errorf("ValidDomain(%q) = %v, want ok=%v", tc.name, err, tc.ok)
		}
		if err != nil && !errors.Is(err, acmecert.ErrInvalid) {
			t.Errorf("ValidDomain(%q) = %v, not ErrInvalid", tc.name, err)
		}
	}
}

func TestNewRefuses(t *testing.T) {
	dir := t.TempDir()
	for name, o := range map[string]acmecert.Options{
		"http directory": {Domain: domain, Directory: "http://ca.example/dir", CacheDir: dir},
		"bad email":      {Domain: domain, Email: "nobody", CacheDir: dir},
		"bad roots":      {Domain: domain, CARoots: []byte("not pem"), CacheDir: dir},
		"ip domain":      {Domain: "10.0.0.1", CacheDir: dir},
	} {
		if _, err := acmecert.New(o); !errors.Is(err, acmecert.ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// TestRedirect: plain HTTP requests other than challenges go to the same
// path on https://DOMAIN[:port] with 308, whatever Host they named.
func TestRedirect(t *testing.T) {
	for port, want := range map[int]string{443: "https://" + domain + "/api/peers?x=1", 8443: "https://" + domain + ":8443/api/peers?x=1"} {
		m, err := acmecert.New(acmecert.Options{Domain: domain, CacheDir: t.TempDir(), TLSPort: port})
		if err != nil {
			t.Fatal(err)
		}
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "http://evil.example/api/peers?x=1", nil)
		m.HTTPHandler().ServeHTTP(rec, req)
		if rec.Code != http.StatusPermanentRedirect || rec.Header().Get("Location") != want {
			t.Errorf("port %d: %d %q, want 308 %q", port, rec.Code, rec.Header().Get("Location"), want)
		}
	}
}

// serve runs the TLS listener (and, with httpLn, the HTTP-01 listener) of
// a manager until the test ends.
func serve(t *testing.T, m *acmecert.Manager, tlsLn, httpLn net.Listener) {
	hs := &http.Server{Handler: http.NotFoundHandler(), ReadHeaderTimeout: 5 * time.Second}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = hs.Serve(tls.NewListener(tlsLn, m.TLSConfig())) }()
	closers := []func(){func() { hs.Close() }}
	if httpLn != nil {
		h := &http.Server{Handler: m.HTTPHandler(), ReadHeaderTimeout: 5 * time.Second}
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Serve(httpLn) }()
		closers = append(closers, func() { h.Close() })
	}
	closers = append(closers, wg.Wait)
	serversMu.Lock()
	servers[t] = closers
	serversMu.Unlock()
	t.Cleanup(func() { stopServers(t) })
}

func listen(t *testing.T, port int) net.Listener {
	ln, err := net.Listen("tcp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// served is the leaf certificate the TLS listener hands a client asking
// for the domain, verified against pebble's root.
func served(t *testing.T, ca *testacme.CA, addr string) *tls.ConnectionState {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{ServerName: domain, RootCAs: ca.Roots})
	if err != nil {
		t.Fatalf("TLS to %s as %s: %v", addr, domain, err)
	}
	defer c.Close()
	st := c.ConnectionState()
	return &st
}

// TestHTTP01: when TLS-ALPN-01 cannot succeed (pebble validates on a
// port nobody listens on) the certificate comes through HTTP-01 on the
// HTTP listener, and nothing of the manager's keeps running once it and
// its listeners are closed.
func TestHTTP01(t *testing.T) {
	ca := testacme.Start(t, testacme.Options{})
	before := goroutineIDs()
	m, err := acmecert.New(acmecert.Options{Domain: domain, Directory: ca.Directory, CARoots: readFile(t, ca.CAFile), CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln := listen(t, 0) // not pebble's TLS port
	serve(t, m, ln, listen(t, ca.HTTPPort))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := m.Obtain(ctx); err != nil {
		t.Fatal(err)
	}
	if st := served(t, ca, ln.Addr().String()); st.PeerCertificates[0].DNSNames[0] != domain {
		t.Fatalf("served %v", st.PeerCertificates[0].DNSNames)
	}
	// A client naming no server (the container health check dialing
	// 127.0.0.1) gets the domain's certificate, not a handshake failure.
	c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the name is checked below
	if err != nil {
		t.Fatalf("TLS without SNI: %v", err)
	}
	if names := c.ConnectionState().PeerCertificates[0].DNSNames; len(names) != 1 || names[0] != domain {
		t.Fatalf("without SNI served %v", names)
	}
	c.Close()
	// Nothing of the manager's keeps running once it and its listeners
	// are closed. autocert gives up the failed TLS-ALPN-01 authorization
	// in a detached goroutine of its own: Close again until that request
	// is done and its connection idle.
	stopServers(t)
	deadline := time.Now().Add(10 * time.Second)
	for m.Close(); ; m.Close() {
		left := newGoroutines(before)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines started by the test still run:\n%s", len(left), strings.Join(left, "\n\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// goroutineIDs are the goroutines running now, by id.
func goroutineIDs() map[string]bool {
	ids := map[string]bool{}
	for _, g := range stacks() {
		ids[goroutineID(g)] = true
	}
	return ids
}

// newGoroutines are the stacks of goroutines not in before, but for the
// renewals autocert schedules for another test's manager (a timer that
// fires into a goroutine of its own; autocert offers no way to stop it,
// and in the server it is meant to run for the process's life): what is
// left was started by this test and outlived its closing.
func newGoroutines(before map[string]bool) []string {
	var out []string
	for _, g := range stacks() {
		if !before[goroutineID(g)] && !strings.Contains(g, "domainRenewal") {
			out = append(out, g)
		}
	}
	return out
}

func stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

// goroutineID is N of a stack's "goroutine N [state]:" header.
func goroutineID(stack string) string {
	f := strings.Fields(stack)
	if len(f) < 2 {
		return ""
	}
	return f[1]
}

// TestIssueAndRenew: a certificate is issued by pebble over TLS-ALPN-01 on
// the TLS listener (no HTTP listener at all), cached 0700, and renewed in
// the background before it expires; the listener then serves the new one.
func TestIssueAndRenew(t *testing.T) {
	ca := testacme.Start(t, testacme.Options{Validity: 30 * time.Second})
	cache := filepath.Join(t.TempDir(), "acme")
	m, err := acmecert.New(acmecert.Options{Domain: domain, Directory: ca.Directory, CARoots: readFile(t, ca.CAFile), CacheDir: cache})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(m.Close)
	ln := listen(t, ca.TLSPort)
	serve(t, m, ln, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	exp, err := m.Obtain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(exp); d <= 0 || d > 31*time.Second {
		t.Fatalf("certificate expires in %v, want the 30 s pebble was told", d)
	}
	first := served(t, ca, ln.Addr().String()).PeerCertificates[0]
	if fi, err := os.Stat(cache); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache dir: %v %v, want 0700", fi.Mode(), err)
	}
	if _, err := os.Stat(filepath.Join(cache, domain)); err != nil {
		t.Fatalf("certificate not cached: %v", err)
	}
	// autocert renews a third of the lifetime before expiry: after ~20 s
	// (twice that as the budget, for a loaded machine).
	testacme.WaitRenewal(t, first, 80*time.Second, func() *x509.Certificate {
		return served(t, ca, ln.Addr().String()).PeerCertificates[0]
	})
}

// stopServers runs the cleanups serve registered, now.
func stopServers(t *testing.T) {
	serversMu.Lock()
	fs := servers[t]
	delete(servers, t)
	serversMu.Unlock()
	for _, f := range fs {
		f()
	}
}

// servers are the close functions of each test's listeners.
var (
	serversMu sync.Mutex
	servers   = map[*testing.T][]func(){}
)

func readFile(t *testing.T, name string) []byte {
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
