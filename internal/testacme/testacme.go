// Package testacme runs a real ACME CA for tests: letsencrypt/pebble on
// loopback, with pebble-challtestsrv as its DNS server answering 127.0.0.1
// for every name, so that any domain a test picks validates against
// listeners on this host. Both binaries come from scripts/deps.sh (into
// .cache/bin); a missing binary fails the test rather than skipping it. It
// does not resolve names for the test's own clients.
package testacme

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testcert"
)

// Options are the ports pebble validates challenges on and the lifetime
// of the certificates it issues.
type Options struct {
	HTTPPort int           // HTTP-01 validation port; 0: a free one
	TLSPort  int           // TLS-ALPN-01 validation port; 0: a free one
	Validity time.Duration // 0: 90 days; short values make renewals happen
	// Answer is the IPv4 address every name resolves to for pebble
	// ("": 127.0.0.1).
	Answer string
	// Cmd prepares pebble's processes, e.g. inside a network namespace
	// (nil: exec.Command); Dial then reaches pebble's loopback there.
	Cmd  func(args ...string) *exec.Cmd
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// CA is a running pebble.
type CA struct {
	Directory string         // ACME directory URL
	CAFile    string         // PEM that the directory's https is signed with
	DirPool   *x509.CertPool // the same, as a pool
	Roots     *x509.CertPool // trusts the certificates pebble issues
	RootsPEM  []byte
	HTTPPort  int
	TLSPort   int
}

// Start runs pebble and its DNS server until the test ends.
func Start(t testing.TB, o Options) *CA {
	t.Helper()
	dir := t.TempDir()
	if o.HTTPPort == 0 {
		o.HTTPPort = FreePort(t)
	}
	if o.TLSPort == 0 {
		o.TLSPort = FreePort(t)
	}
	validity := uint64(90 * 24 * 3600)
	if o.Validity > 0 {
		validity = uint64(o.Validity / time.Second)
	}
	if o.Answer == "" {
		o.Answer = "127.0.0.1"
	}
	if o.Cmd == nil {
		o.Cmd = func(args ...string) *exec.Cmd { return exec.Command(args[0], args[1:]...) }
	}
	dns := freeUDPPort(t)
	start(t, o.Cmd, "pebble-challtestsrv", nil, "-dnsserver", "127.0.0.1:"+strconv.Itoa(dns), "-defaultIPv4", o.Answer, "-defaultIPv6", "",
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "", "-management", "127.0.0.1:"+strconv.Itoa(FreePort(t)))

	cert := testcert.New(t)
	certFile, keyFile := cert.Write(t, dir)
	listen, mgmt := "127.0.0.1:"+strconv.Itoa(FreePort(t)), "127.0.0.1:"+strconv.Itoa(FreePort(t))
	cfg := map[string]any{"pebble": map[string]any{
		"listenAddress": listen, "managementListenAddress": mgmt,
		"certificate": certFile, "privateKey": keyFile,
		"httpPort": o.HTTPPort, "tlsPort": o.TLSPort, "ocspResponderURL": "",
		"externalAccountBindingRequired": false, "keyAlgorithm": "ecdsa",
		"retryAfter": map[string]int{"authz": 1, "order": 1},
		"profiles":   map[string]any{"default": map[string]any{"description": "test", "validityPeriod": validity}},
	}}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(dir, "pebble.json")
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// No random validation delay, no forced bad nonces, and every order
	// validated afresh (a renewal must answer a challenge again).
	start(t, o.Cmd, "pebble", []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"},
		"-config", cfgFile, "-dnsserver", "127.0.0.1:"+strconv.Itoa(dns))

	ca := &CA{Directory: "https://" + listen + "/dir", CAFile: certFile, DirPool: cert.Pool, HTTPPort: o.HTTPPort, TLSPort: o.TLSPort}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}, DialContext: o.Dial}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ca.RootsPEM, err = get(hc, "https://"+mgmt+"/roots/0")
		if err == nil {
			if _, err = get(hc, ca.Directory); err == nil {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	ca.Roots = x509.NewCertPool()
	if !ca.Roots.AppendCertsFromPEM(ca.RootsPEM) {
		t.Fatalf("pebble root is not PEM: %q", ca.RootsPEM)
	}
	return ca
}

func get(hc *http.Client, url string) ([]byte, error) {
	resp, err := hc.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return b, nil
}

// Bin is the path of a pebble binary: .cache/bin (scripts/deps.sh) or PATH.
func Bin(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(proctest.Root(), ".cache", "bin", name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	t.Fatalf("%s not installed: run scripts/deps.sh (go install github.com/letsencrypt/pebble/v2/cmd/%s@v2.10.3)", name, name)
	return ""
}

// start runs a binary until test cleanup, which kills it by PID.
func start(t testing.TB, prepare func(args ...string) *exec.Cmd, name string, env []string, args ...string) {
	t.Helper()
	var out bytes.Buffer
	cmd := prepare(append([]string{Bin(t, name)}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	// One writer for both: exec copies them with one goroutine, done by Wait.
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		if t.Failed() || os.Getenv("WIREMESH_TEST_LOGS") != "" {
			t.Logf("output of %s:\n%s", name, out.String())
		}
	})
}

// FreePort is a TCP port free on 127.0.0.1 at the time of the call.
func FreePort(t testing.TB) int {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

func freeUDPPort(t testing.TB) int {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}
