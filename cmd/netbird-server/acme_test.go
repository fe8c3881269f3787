package main_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testacme"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// acmeDomain resolves to 127.0.0.1 for pebble (its DNS server answers so
// for every name); the test's clients dial 127.0.0.1 and present the name.
const acmeDomain = "vpn.wiremesh.test"

// TestACME runs netbird-server --domain against a real ACME CA (pebble):
// the certificate for the name is issued through TLS-ALPN-01 on the main
// port, cached 0700 in DATADIR/acme; REST, the dashboard's settings and
// the agent's gRPC login work over https with that name and advertise
// https/rels:// URLs on it; the relay accepts TLS (WebSocket and QUIC)
// with the ACME certificate; plain HTTP answers 308 to https; and the
// certificate is renewed before it expires and the server then serves the
// new one.
func TestACME(t *testing.T) {
	ca := testacme.Start(t, testacme.Options{Validity: 30 * time.Second})
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", data, "--domain", acmeDomain,
		"--listen", "127.0.0.1:"+strconv.Itoa(ca.TLSPort), "--acme-http-listen", "127.0.0.1:"+strconv.Itoa(ca.HTTPPort),
		"--acme-directory", ca.Directory, "--acme-ca-file", ca.CAFile, "--acme-email", "ops@wiremesh.test", "--stun-port", "0")
	srv.Wait(t, regexp.MustCompile(`TLS certificate ready`), 60*time.Second)
	port := strconv.Itoa(ca.TLSPort)
	hostPort := acmeDomain + ":" + port

	tlsConf := &tls.Config{RootCAs: ca.Roots, ServerName: acmeDomain}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConf, DialContext: testacme.DialLoopback, ForceAttemptHTTP2: true},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	defer hc.CloseIdleConnections()
	get := func(url string) (*http.Response, string) {
		t.Helper()
		resp, err := hc.Get(url)
		if err != nil {
			t.Fatalf("GET %s: %v", url, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("https://" + hostPort + "/healthz")
	if resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("/healthz over https: %s %s", resp.Status, body)
	}
	leaf := resp.TLS.PeerCertificates[0]
	if len(leaf.DNSNames) != 1 || leaf.DNSNames[0] != acmeDomain {
		t.Fatalf("certificate names %v, want %s", leaf.DNSNames, acmeDomain)
	}
	if resp, body := get("https://" + hostPort + "/dashboard-config.json"); resp.StatusCode != 200 || !strings.Contains(body, `"issuer":"https://`+hostPort+`/oauth2"`) {
		t.Fatalf("dashboard config: %s %s", resp.Status, body)
	}
	if fi, err := os.Stat(filepath.Join(data, "acme")); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("certificate cache: %v %v, want a 0700 directory", fi, err)
	}

	// Plain HTTP: everything but challenges goes to https on the name.
	resp, _ = get("http://127.0.0.1:" + strconv.Itoa(ca.HTTPPort) + "/peers?x=1")
	if want := "https://" + hostPort + "/peers?x=1"; resp.StatusCode != http.StatusPermanentRedirect || resp.Header.Get("Location") != want {
		t.Fatalf("http: %s Location %q, want 308 %q", resp.Status, resp.Header.Get("Location"), want)
	}

	// The agent's side: gRPC login over TLS with the name.
	key := createKey(t, "netbird-server", data, "--reusable")
	conn, err := grpc.NewClient("passthrough:///"+hostPort, grpc.WithContextDialer(func(ctx context.Context, addr string) (net.Conn, error) {
		return testacme.DialLoopback(ctx, "tcp", addr)
	}), grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: ca.Roots})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	p := testpeer.New(conn, "acme-peer")
	lr, err := p.Login(ctx, key)
	if err != nil {
		t.Fatalf("login over https: %v", err)
	}
	checkTLSLogin(t, ctx, p, lr.GetNetbirdConfig(), hostPort, "rels://127.0.0.1:"+port, tlsConf)

	// Renewal: pebble's certificates live 30 s; a third before expiry the
	// server gets a new one and serves it (~20 s; twice the usual time as
	// the budget, for a loaded machine).
	testacme.WaitRenewal(t, leaf, 90*time.Second, func() *x509.Certificate { return servedCert(t, hostPort, tlsConf) })
	srv.Wait(t, regexp.MustCompile(`(?s)ACME certificate stored.*ACME certificate stored`), 5*time.Second)
}

func servedCert(t *testing.T, addr string, conf *tls.Config) *x509.Certificate {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	raw, err := testacme.DialLoopback(ctx, "tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := tls.Client(raw, conf)
	defer c.Close()
	if err := c.HandshakeContext(ctx); err != nil {
		t.Fatalf("TLS handshake with %s: %v", addr, err)
	}
	return c.ConnectionState().PeerCertificates[0]
}

// TestListenRefusals: without TLS the server will not serve plaintext on
// a public address unless told --insecure-listen, and then warns; --domain
// with an IP or with certificate files refuses to start naming the flag.
func TestListenRefusals(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "0.0.0.0:0"}, "--insecure-listen 0.0.0.0:0"},
		{[]string{"--domain", "192.0.2.1"}, "--domain: invalid ACME setting"},
		{[]string{"--domain", "vpn.example.com", "--tls-cert-file", "c", "--tls-key-file", "k"}, "drop --tls-cert-file"},
		{[]string{"--public-url", "https://vpn.example.com/mesh"}, "--public-url"},
		{[]string{"--acme-email", "a@example.com"}, "--acme-email needs --domain"},
	} {
		out, err := proctest.Run(t, "netbird-server", append([]string{"--datadir", dir, "--stun-port", "0"}, tc.args...)...)
		if err == nil || !strings.Contains(out, tc.want) {
			t.Errorf("%v: %v\n%s\nwant a refusal naming %q", tc.args, err, out, tc.want)
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("refused starts left %v in the datadir", entries)
	}
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", dir, "--insecure-listen", "0.0.0.0:0", "--stun-port", "0", "--public-address", "127.0.0.1")
	srv.Wait(t, regexp.MustCompile(`plaintext on a non-loopback address \(--insecure-listen\)`), 30*time.Second)
}

// TestPublicURL: behind a TLS reverse proxy the server listens in
// plaintext on loopback and tells clients the proxy's https name and port:
// signal over TLS, the relay as rels://, the login issuer on https.
func TestPublicURL(t *testing.T) {
	dir := t.TempDir()
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", dir, "--listen", "127.0.0.1:0", "--stun-port", "0",
		"--public-url", "https://vpn.example.com:8443")
	addr := srv.Wait(t, listening, 30*time.Second)[1]
	srv.Wait(t, regexp.MustCompile(`--management-url https://vpn\.example\.com:8443 `), 5*time.Second)
	key := createKey(t, "netbird-server", dir, "--reusable")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	lr, err := testpeer.New(dial(t, addr), "behind-proxy").Login(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := lr.GetNetbirdConfig()
	if cfg.GetSignal().GetProtocol() != mgmtpb.HostConfig_HTTPS || cfg.GetSignal().GetUri() != "vpn.example.com:8443" {
		t.Fatalf("signal advertised as %v %q", cfg.GetSignal().GetProtocol(), cfg.GetSignal().GetUri())
	}
	if urls := cfg.GetRelay().GetUrls(); len(urls) != 1 || urls[0] != "rels://vpn.example.com:8443" {
		t.Fatalf("relay URLs %v", urls)
	}
	resp, err := http.Get("http://" + addr + "/dashboard-config.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(b), `"issuer":"https://vpn.example.com:8443/oauth2"`) {
		t.Fatalf("dashboard config: %s", b)
	}
}
