package healthcheck

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	healthy := func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"status":"ok"}`)) }
	sick := func(w http.ResponseWriter, _ *http.Request) { http.Error(w, `{"status":"unhealthy"}`, 503) }
	ok := httptest.NewServer(http.HandlerFunc(healthy))
	defer ok.Close()
	okTLS := httptest.NewTLSServer(http.HandlerFunc(healthy))
	defer okTLS.Close()
	bad := httptest.NewServer(http.HandlerFunc(sick))
	defer bad.Close()
	closed := httptest.NewServer(http.HandlerFunc(healthy))
	closed.Close()
	for _, tc := range []struct {
		url, wantErr string
	}{
		{url: ok.URL + "/healthz"},
		{url: okTLS.URL + "/healthz"}, // self-signed on loopback: liveness only
		{url: bad.URL + "/healthz", wantErr: "HTTP 503"},
		{url: closed.URL + "/healthz", wantErr: "connect"},
		{url: "ftp://x/healthz", wantErr: "want http(s)"},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err := Check(ctx, tc.url)
		cancel()
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("Check(%s) = %v, want error containing %q", tc.url, err, tc.wantErr)
		}
	}
}

func TestCommand(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(503) }))
	defer srv.Close()
	cmd := Command(srv.URL + "/healthz")
	cmd.SetArgs(nil)
	if err := cmd.ExecuteContext(context.Background()); err == nil {
		t.Fatal("healthcheck of an unhealthy server succeeded")
	}
}

// TestServerName: a server choosing its certificate by SNI (as an ACME
// one does) refuses a handshake naming none; --server-name makes the
// probe of https://127.0.0.1 name the domain.
func TestServerName(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.StartTLS()
	defer srv.Close()
	cert := srv.TLS.Certificates[0]
	srv.TLS.Certificates = nil
	srv.TLS.GetCertificate = func(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
		if hello.ServerName != "vpn.example.com" {
			return nil, fmt.Errorf("no certificate for %q", hello.ServerName)
		}
		return &cert, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := Check(ctx, srv.URL+"/healthz"); err == nil {
		t.Fatal("a handshake without SNI succeeded: the server under test does not check names")
	}
	if err := CheckName(ctx, srv.URL+"/healthz", "vpn.example.com"); err != nil {
		t.Fatalf("with the server name: %v", err)
	}
	cmd := Command(srv.URL + "/healthz")
	cmd.SetArgs([]string{"--server-name", "vpn.example.com"})
	if err := cmd.ExecuteContext(ctx); err != nil {
		t.Fatalf("healthcheck --server-name: %v", err)
	}
}
