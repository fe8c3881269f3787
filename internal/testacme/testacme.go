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
	"strings"
	"sync"
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
	cert := testcert.New(t)
	certFile, keyFile := cert.Write(t, dir)
	// pebble and its DNS server bind ports picked here, which another
	// process may take before they do: start again on new ones when one of
	// them exits with EADDRINUSE.
	var ca *CA
	for attempt := 1; ; attempt++ {
		var retry bool
		ca, retry = startOnce(t, o, dir, cert.Pool, certFile, keyFile, validity)
		if ca != nil {
			break
		}
		if !retry || attempt == 5 {
			t.Fatalf("pebble did not come up (attempt %d)", attempt)
		}
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

// startOnce starts pebble-challtestsrv and pebble on freshly picked ports
// and waits until pebble answers. It returns nil and retry=true when a
// process lost one of its ports to someone else (it then stopped both);
// other failures are fatal.
func startOnce(t testing.TB, o Options, dir string, pool *x509.CertPool, certFile, keyFile string, validity uint64) (ca *CA, retry bool) {
	t.Helper()
	dns := freeUDPPort(t)
	chall := start(t, o.Cmd, "pebble-challtestsrv", nil, "-dnsserver", "127.0.0.1:"+strconv.Itoa(dns), "-defaultIPv4", o.Answer, "-defaultIPv6", "",
		"-http01", "", "-https01", "", "-tlsalpn01", "", "-doh", "", "-management", "127.0.0.1:"+strconv.Itoa(FreePort(t)))
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
	peb := start(t, o.Cmd, "pebble", []string{"PEBBLE_VA_NOSLEEP=1", "PEBBLE_WFE_NONCEREJECT=0", "PEBBLE_AUTHZREUSE=0"},
		"-config", cfgFile, "-dnsserver", "127.0.0.1:"+strconv.Itoa(dns))

	ca = &CA{Directory: "https://" + listen + "/dir", CAFile: certFile, DirPool: pool, HTTPPort: o.HTTPPort, TLSPort: o.TLSPort}
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, DialContext: o.Dial}}
	defer hc.CloseIdleConnections()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ca.RootsPEM, err = get(hc, "https://"+mgmt+"/roots/0")
		if err == nil {
			if _, err = get(hc, ca.Directory); err == nil {
				// The DNS server logs a failed bind and runs on: ask it.
				if o.Dial != nil || dnsAnswers(dns) {
					return ca, false
				}
				err = fmt.Errorf("pebble-challtestsrv does not answer DNS on UDP %d", dns)
				if time.Now().After(deadline) || strings.Contains(chall.output(), "address already in use") {
					chall.stop()
					peb.stop()
					t.Logf("%v; starting again:\n%s", err, chall.output())
					return nil, true
				}
			}
		}
		for _, p := range []*proc{chall, peb} {
			if p.exited() {
				out := p.output()
				chall.stop()
				peb.stop()
				if strings.Contains(out, "address already in use") {
					t.Logf("%s lost a port to another process; starting again: %s", p.name, strings.TrimSpace(out))
					return nil, true
				}
				t.Fatalf("%s exited:\n%s", p.name, out)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pebble did not come up: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// dnsAnswers reports whether a DNS server answers a query on UDP port.
func dnsAnswers(port int) bool {
	c, err := net.Dial("udp4", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	defer c.Close()
	// ID 0x7e57, recursion desired, one question: "t." IN A.
	q := []byte{0x7e, 0x57, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, 't', 0, 0, 1, 0, 1}
	if _, err := c.Write(q); err != nil {
		return false
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, 512)
	n, err := c.Read(b)
	return err == nil && n >= 2 && b[0] == 0x7e && b[1] == 0x57
}

// proc is a running pebble binary.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) output() string { return p.out.String() }

// stop kills the process and waits for it; again is a no-op.
func (p *proc) stop() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// syncBuffer is the output of a process, read while it is written.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// start runs a binary until test cleanup (or stop), which kills it by PID.
func start(t testing.TB, prepare func(args ...string) *exec.Cmd, name string, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = prepare(append([]string{Bin(t, name)}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	// One writer for both: exec copies them with one goroutine, done by Wait.
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.stop()
		if t.Failed() || os.Getenv("WIREMESH_TEST_LOGS") != "" {
			t.Logf("output of %s:\n%s", name, p.output())
		}
	})
	return p
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

// DialLoopback dials 127.0.0.1 at the port of addr, whatever its host:
// the test's clients reach a server by the name pebble issued for without
// that name resolving on this host.
func DialLoopback(ctx context.Context, network, addr string) (net.Conn, error) {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	return (&net.Dialer{}).DialContext(ctx, network, net.JoinHostPort("127.0.0.1", port))
}

// WaitRenewal polls served once a second until it returns a certificate
// other than first, which must then expire later than first, failing the
// test when none comes within budget.
func WaitRenewal(t testing.TB, first *x509.Certificate, budget time.Duration, served func() *x509.Certificate) {
	t.Helper()
	deadline := time.Now().Add(budget)
	for {
		cur := served()
		if cur.SerialNumber.Cmp(first.SerialNumber) != 0 {
			if !cur.NotAfter.After(first.NotAfter) {
				t.Fatalf("renewed certificate expires %v, not after the first's %v", cur.NotAfter, first.NotAfter)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no renewal within %v (first expires %v)", budget, first.NotAfter)
		}
		time.Sleep(time.Second)
	}
}
