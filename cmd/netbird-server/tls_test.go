package main_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/relaywire"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

func writeCert(t *testing.T, dir string) *x509.CertPool {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(k)
	_ = os.WriteFile(filepath.Join(dir, "cert.pem"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
	_ = os.WriteFile(filepath.Join(dir, "key.pem"), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool
}

// TestTLS runs the all-in-one server with a certificate: management and
// signal answer gRPC over TLS, clients are told to use TLS for signal and
// the relay (rels://), and the relay serves WebSocket over TLS and QUIC on
// the same port, accepting the token management issued.
func TestTLS(t *testing.T) {
	dir := t.TempDir()
	pool := writeCert(t, dir)
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", filepath.Join(dir, "data"), "--listen", "127.0.0.1:0", "--stun-port", "0",
		"--public-address", "127.0.0.1", "--tls-cert-file", filepath.Join(dir, "cert.pem"), "--tls-key-file", filepath.Join(dir, "key.pem"))
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
	cfg := lr.GetNetbirdConfig()
	if cfg.GetSignal().GetProtocol() != mgmtpb.HostConfig_HTTPS {
		t.Fatalf("signal advertised as %v, want HTTPS", cfg.GetSignal().GetProtocol())
	}
	rc := cfg.GetRelay()
	if len(rc.GetUrls()) != 1 || rc.GetUrls()[0] != "rels://"+addr {
		t.Fatalf("relay URLs %v, want rels://%s", rc.GetUrls(), addr)
	}
	tok, err := relaywire.Credentials{Payload: rc.GetTokenPayload(), Signature: rc.GetTokenSignature()}.Binary()
	if err != nil {
		t.Fatal(err)
	}
	for name, dial := range map[string]func(context.Context, string, *tls.Config) (relayconn.Conn, error){
		"wss": relayconn.DialWS, "quic": relayconn.DialQUIC,
	} {
		c, err := dial(ctx, rc.GetUrls()[0], &tls.Config{RootCAs: pool})
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
		if got, err := relaywire.ParseAuthResponse(msg); err != nil || got != "rels://"+addr {
			t.Fatalf("relay over %s answered %q %v", name, got, err)
		}
		c.Close()
	}
}
