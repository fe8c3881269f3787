package server_test

import (
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"

	"github.com/wiremesh/wiremesh/internal/testcert"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
	"github.com/wiremesh/wiremesh/proto/signalpb"
)

// TestNginxSnippet runs the nginx configuration docs/operations.md gives,
// as written there (only the certificate, names and ports replaced), in
// front of a server: an agent registers and keeps its Sync stream through
// it (an update arrives on the open stream), signal's gRPC path reaches the
// gRPC server, and the REST API answers. nginx must be installed
// (scripts/deps.sh): without it the test fails.
func TestNginxSnippet(t *testing.T) {
	nginx, err := exec.LookPath("nginx")
	if err != nil {
		if nginx, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Fatal("nginx is not installed (scripts/deps.sh installs nginx-light)")
		}
	}
	block, e, dir, port, cert := proxyRig(t, "nginx")
	certFile, keyFile := cert.Write(t, dir)
	snippet := replaceAll(t, block,
		"listen 443 ssl http2;", "listen 127.0.0.1:"+port+" ssl http2;",
		"server_name vpn.example.com;", "server_name 127.0.0.1;",
		"/etc/letsencrypt/live/vpn.example.com/fullchain.pem", certFile,
		"/etc/letsencrypt/live/vpn.example.com/privkey.pem", keyFile,
		"127.0.0.1:33073", e.addr)
	// One process as this user (no workers dropping privileges), all of
	// its files in the test's directory.
	conf := "daemon off;\nmaster_process off;\npid " + dir + "/nginx.pid;\nerror_log " + dir + "/error.log info;\nevents {}\nhttp {\n" +
		"access_log off;\nclient_body_temp_path " + dir + "/body;\nproxy_temp_path " + dir + "/proxy;\nfastcgi_temp_path " + dir + "/fastcgi;\n" +
		"uwsgi_temp_path " + dir + "/uwsgi;\nscgi_temp_path " + dir + "/scgi;\n" + snippet + "}\n"
	confFile := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(nginx, "-t", "-p", dir, "-c", confFile).CombinedOutput(); err != nil {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
	cmd := exec.Command(nginx, "-p", dir, "-c", confFile)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Logf("nginx error.log:\n%s", b)
		}
	})
	addr := "127.0.0.1:" + port
	waitListening(t, addr)
	checkThroughProxy(t, e, addr, cert)
}

// checkThroughProxy checks a TLS reverse proxy at addr in front of e: an
// agent registers and keeps its Sync stream through it (an update arrives
// on the open stream, not when a buffer fills), signal's gRPC path reaches
// the gRPC server, and the REST API answers.
func checkThroughProxy(t *testing.T, e *env, addr string, cert testcert.Cert) {
	t.Helper()
	tlsConf := &tls.Config{RootCAs: cert.Pool, ServerName: "127.0.0.1"}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(tlsConf)))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	a := testpeer.New(conn, "via-proxy")
	if _, err := a.Login(c, secret); err != nil {
		t.Fatalf("register through the proxy: %v", err)
	}
	s, err := a.Sync(c)
	if err != nil {
		t.Fatalf("sync through the proxy: %v", err)
	}
	defer s.Close()
	// A second peer joins (directly): the open stream through the proxy
	// carries the new map at once, not when a buffer fills.
	b := testpeer.New(e.conn, "direct")
	if _, err := b.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	err = s.WaitFor(10*time.Second, func(msgs []*mgmtpb.SyncResponse) bool {
		nm := s.LatestMap()
		return nm != nil && len(nm.GetRemotePeers()) == 1 && nm.GetRemotePeers()[0].GetWgPubKey() == b.Public().String()
	})
	if err != nil {
		t.Fatalf("update through the proxy: %v", err)
	}
	// Signal's path is passed as gRPC: this server serves no signal, so
	// the gRPC server itself answers Unimplemented (a wrong proxy answers
	// with an HTTP error instead).
	_, err = signalpb.NewSignalExchangeClient(conn).Send(c, &signalpb.EncryptedMessage{})
	if code(err) != codes.Unimplemented {
		t.Fatalf("signal through the proxy: %v, want Unimplemented from the server", err)
	}
	// REST.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}, Timeout: 10 * time.Second}
	resp, err := hc.Get("https://" + addr + "/api/instance")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var inst map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&inst); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /api/instance through the proxy: %d, %v", resp.StatusCode, err)
	}
}

// TestCaddySnippet runs the Caddyfile docs/operations.md gives in front of
// a server (the site name becomes 127.0.0.1 with a test certificate instead
// of ACME; admin endpoint and http redirects off), with the checks of
// TestNginxSnippet. Caddy must be installed (scripts/deps.sh).
func TestCaddySnippet(t *testing.T) {
	caddy, err := exec.LookPath("caddy")
	if err != nil {
		t.Fatal("caddy is not installed (scripts/deps.sh installs it)")
	}
	block, e, dir, port, cert := proxyRig(t, "caddyfile")
	certFile, keyFile := cert.Write(t, dir)
	snippet := replaceAll(t, block,
		"vpn.example.com {", "https://127.0.0.1:"+port+" {\n\ttls "+certFile+" "+keyFile,
		"127.0.0.1:33073", e.addr)
	conf := "{\n\tadmin off\n\tauto_https disable_redirects\n\tstorage file_system " + dir + "/data\n}\n" + snippet
	confFile := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(confFile, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(caddy, "run", "--config", confFile, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "HOME="+dir, "XDG_DATA_HOME="+dir+"/data", "XDG_CONFIG_HOME="+dir+"/config")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			t.Logf("caddy output:\n%s", out.String())
		}
	})
	addr := "127.0.0.1:" + port
	waitListening(t, addr)
	checkThroughProxy(t, e, addr, cert)
}

// readDoc reads docs/operations.md.
// proxyRig is what a proxy snippet test starts from: docs/operations.md's
// code block in language lang, a running server, a directory, a free port
// for the proxy and a test certificate.
func proxyRig(t *testing.T, lang string) (block string, e *env, dir, port string, cert testcert.Cert) {
	t.Helper()
	m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindSubmatch(readDoc(t))
	if m == nil {
		t.Fatalf("docs/operations.md has no %s block", lang)
	}
	e = startWith(t, t.TempDir(), server.Options{})
	return string(m[1]), e, t.TempDir(), freePort(t), testcert.New(t)
}

func readDoc(t *testing.T) []byte {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// replaceAll applies old, new pairs to a documented snippet, failing when
// the snippet no longer holds an old text (the test must follow the doc).
func replaceAll(t *testing.T, s string, pairs ...string) string {
	t.Helper()
	for i := 0; i+1 < len(pairs); i += 2 {
		if !strings.Contains(s, pairs[i]) {
			t.Fatalf("the documented snippet no longer holds %q: update this test with it", pairs[i])
		}
		s = strings.ReplaceAll(s, pairs[i], pairs[i+1])
	}
	return s
}

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, p, _ := net.SplitHostPort(ln.Addr().String())
	return p
}

func waitListening(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s: %v", addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
