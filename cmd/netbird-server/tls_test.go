package main_test

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/relaywire"
	"github.com/wiremesh/wiremesh/internal/testcert"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestTLS runs the all-in-one server with a certificate: management and
// signal answer gRPC over TLS, clients are told to use TLS for signal and
// the relay (rels://), and the relay serves WebSocket over TLS and QUIC on
// the same port, accepting the token management issued.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	cert := testcert.New(t)
	certFile, keyFile := cert.Write(t, dir)
	pool := cert.Pool
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--stun-port", "0",
		"--public-address", "127.0.0.1", "--tls-cert-file", certFile, "--tls-key-file", keyFile)
	addr := srv.Wait(t, listening, 30*time.Second)[1]
	key := createKey(t, "netbird-server", filepath.Join(dir, "data"), "--reusable")

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{RootCAs: pool})))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	p := testpeer.New(conn, "tls-peer")
	lr, err := p.Login(ctx, key)
	if err != nil {
		t.Fatalf("login over TLS: %v", err)
	}
	checkTLSLogin(t, ctx, p, lr.GetNetbirdConfig(), addr, "rels://"+addr, &tls.Config{RootCAs: pool})
}

// checkTLSLogin: a login over TLS advertises signal over HTTPS at hostPort
// and the relay as rels://hostPort, and the relay reached at dialURL with
// conf accepts the token management issued to p over both WebSocket and
// QUIC.
func checkTLSLogin(t *testing.T, ctx context.Context, p *testpeer.Peer, cfg *mgmtpb.NetbirdConfig, hostPort, dialURL string, conf *tls.Config) {
	t.Helper()
	if cfg.GetSignal().GetProtocol() != mgmtpb.HostConfig_HTTPS || cfg.GetSignal().GetUri() != hostPort {
		t.Fatalf("signal advertised as %v %q, want HTTPS %s", cfg.GetSignal().GetProtocol(), cfg.GetSignal().GetUri(), hostPort)
	}
	rc := cfg.GetRelay()
	if len(rc.GetUrls()) != 1 || rc.GetUrls()[0] != "rels://"+hostPort {
		t.Fatalf("relay URLs %v, want rels://%s", rc.GetUrls(), hostPort)
	}
	tok, err := relaywire.Credentials{Payload: rc.GetTokenPayload(), Signature: rc.GetTokenSignature()}.Binary()
	if err != nil {
		t.Fatal(err)
	}
	for name, dial := range map[string]func(context.Context, string, *tls.Config) (relayconn.Conn, error){
		"wss": relayconn.DialWS, "quic": relayconn.DialQUIC,
	} {
		c, err := dial(ctx, dialURL, conf.Clone())
		if err != nil {
			t.Fatalf("relay over %s: %v", name, err)
		}
		if err := c.WriteMessage(ctx, relaywire.Auth(relaywire.HashID(p.Public().String()), tok)); err != nil {
			t.Fatal(err)
		}
		msg, err := c.ReadMessage(ctx)
		if err != nil {
			t.Fatalf("relay over %s refused the token: %v", name, err)
		}
		if got, err := relaywire.ParseAuthResponse(msg); err != nil || got != "rels://"+hostPort {
			t.Fatalf("relay over %s answered %q %v", name, got, err)
		}
		c.Close()
	}
}

// TestTLSBrowser: a browser-like client (offering h2 and http/1.1) gets
// HTTP/1.1 on the TLS port and with it the dashboard, its settings (an
// https issuer) and the REST API, while gRPC clients (h2 only, TestTLS)
// keep h2.
func TestTLSBrowser(t *testing.T) {
	dir := t.TempDir()
	cert := testcert.New(t)
	certFile, keyFile := cert.Write(t, dir)
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--stun-port", "0",
		"--public-address", "127.0.0.1", "--tls-cert-file", certFile, "--tls-key-file", keyFile)
	addr := srv.Wait(t, listening, 30*time.Second)[1]
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}, ForceAttemptHTTP2: true}}
	get := func(path string) (*http.Response, string) {
		t.Helper()
		resp, err := c.Get("https://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp, string(b)
	}
	resp, body := get("/peers")
	if resp.StatusCode != 200 || resp.Proto != "HTTP/1.1" || resp.TLS.NegotiatedProtocol != "http/1.1" || !strings.Contains(body, "<html") {
		t.Fatalf("/peers: %s %s (ALPN %q): %.200s", resp.Status, resp.Proto, resp.TLS.NegotiatedProtocol, body)
	}
	if resp, body := get("/dashboard-config.json"); resp.StatusCode != 200 || !strings.Contains(body, `"issuer":"https://127.0.0.1:`) {
		t.Fatalf("config: %s %s", resp.Status, body)
	}
	if resp, body := get("/api/peers"); resp.StatusCode != http.StatusUnauthorized || !strings.Contains(body, `"code":401`) {
		t.Fatalf("REST over TLS: %s %s", resp.Status, body)
	}
}
