package relayclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/relaywire"
	"github.com/wiremesh/wiremesh/internal/testcert"
)

const secret = "relay-test-secret"

// startRelay runs netbird-relay as its own process on a loopback port.
func startRelay(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url := "rel://" + addr
	p := proctest.Start(t, nil, "netbird-relay", "-l", addr, "-e", url, "-s", secret)
	p.Wait(t, regexp.MustCompile(`exposed as`), 20*time.Second)
	return url
}

// bound is the token management issues to the peer with public key pub.
func bound(pub string) relaywire.Credentials {
	return relaywire.IssueFor(secret, time.Now().Add(time.Hour), relaywire.HashID(pub))
}

// manager runs a relay manager for a new peer with its own token.
func manager(t *testing.T, url string) (*Manager, string) {
	t.Helper()
	k, _ := key.NewPrivate()
	pub := k.Public().String()
	m := NewManager(pub, nil, slog.New(slog.DiscardHandler))
	t.Cleanup(m.Close)
	m.Update([]string{url}, bound(pub))
	return m, pub
}

func waitHome(t *testing.T, m *Manager) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for m.HomeURL() == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no home relay: %+v", m.States())
		}
		time.Sleep(20 * time.Millisecond)
	}
	return m.HomeURL()
}

func TestPeersThroughRelay(t *testing.T) {
	url := startRelay(t)
	a, pubA := manager(t, url)
	b, pubB := manager(t, url)
	if home := waitHome(t, a); home != url {
		t.Fatalf("home %q, want the relay's instance URL %q", home, url)
	}
	waitHome(t, b)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type res struct {
		pc  *PeerConn
		err error
	}
	ra, rb := make(chan res, 1), make(chan res, 1)
	go func() { pc, err := a.Open(ctx, "", pubB); ra <- res{pc, err} }()
	go func() { pc, err := b.Open(ctx, a.HomeURL(), pubA); rb <- res{pc, err} }()
	ca, cb := <-ra, <-rb
	if ca.err != nil || cb.err != nil {
		t.Fatalf("open: %v / %v", ca.err, cb.err)
	}
	for i := range 100 {
		msg := bytes.Repeat([]byte{byte(i)}, 1200)
		if _, err := ca.pc.Write(msg); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 2000)
		n, err := cb.pc.Read(buf)
		if err != nil || !bytes.Equal(buf[:n], msg) {
			t.Fatalf("datagram %d: %d bytes, %v", i, n, err)
		}
	}
	if _, err := cb.pc.Write([]byte("back")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if n, err := ca.pc.Read(buf); err != nil || string(buf[:n]) != "back" {
		t.Fatalf("reply %q %v", buf[:n], err)
	}

	// B leaves: A's connection to it ends (peers went offline).
	b.Close()
	select {
	case <-ca.pc.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("A's relayed connection survived B leaving")
	}
	if _, err := ca.pc.Read(buf); err == nil {
		t.Fatal("read on a closed relayed connection succeeded")
	}
}

func TestOpenWaitsForPeer(t *testing.T) {
	url := startRelay(t)
	a, _ := manager(t, url)
	waitHome(t, a)
	k, _ := key.NewPrivate()
	late := k.Public().String()
	opened := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := a.Open(ctx, "", late)
		opened <- err
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case err := <-opened:
		t.Fatalf("opened before the peer connected: %v", err)
	default:
	}
	m := NewManager(late, nil, slog.New(slog.DiscardHandler))
	defer m.Close()
	m.Update([]string{url}, bound(late))
	if err := <-opened; err != nil {
		t.Fatalf("open after the peer came: %v", err)
	}
}

func TestBadTokenRefused(t *testing.T) {
	url := startRelay(t)
	for name, cred := range map[string]relaywire.Credentials{
		"expired": relaywire.Issue(secret, time.Now().Add(-time.Minute)),
		"forged":  relaywire.Issue("not-the-secret", time.Now().Add(time.Hour)),
		"unbound": relaywire.Issue(secret, time.Now().Add(time.Hour)),
		"other":   bound("another peer's key"),
	} {
		t.Run(name, func(t *testing.T) {
			k, _ := key.NewPrivate()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := Dial(ctx, url, k.Public().String(), cred, nil, slog.New(slog.DiscardHandler))
			if err == nil {
				t.Fatal("relay accepted a bad token")
			}
			t.Log(fmt.Sprint(err))
		})
	}
}

// TestForeignRelay: peers with different home relays meet on one of them,
// the other side dialing it as a foreign relay.
func TestForeignRelay(t *testing.T) {
	r1, r2 := startRelay(t), startRelay(t)
	a, pubA := manager(t, r1)
	b, pubB := manager(t, r2)
	homeA, homeB := waitHome(t, a), waitHome(t, b)
	if homeA == homeB {
		t.Fatal("both on one relay")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	errs := make(chan error, 2)
	var ca, cb *PeerConn
	go func() {
		var err error
		ca, err = a.Open(ctx, "", pubB)
		errs <- err
	}()
	go func() {
		var err error
		cb, err = b.Open(ctx, homeA, pubA) // A's home is foreign to B
		errs <- err
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cb.Write([]byte("via the foreign relay")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	if n, err := ca.Read(buf); err != nil || string(buf[:n]) != "via the foreign relay" {
		t.Fatalf("got %q %v", buf[:n], err)
	}
	if b.HomeURL() != homeB {
		t.Fatal("dialing a foreign relay changed B's home")
	}
}

// TestTLSRelay: a rels:// relay with a certificate carries datagrams over
// WebSocket with TLS, its QUIC listener running beside.
func TestTLSRelay(t *testing.T) {
	cert := testcert.New(t)
	certFile, keyFile := cert.Write(t, t.TempDir())
	pool := cert.Pool
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	url := "rels://" + addr
	p := proctest.Start(t, nil, "netbird-relay", "-l", addr, "-e", url, "-s", secret,
		"--tls-cert-file", certFile, "--tls-key-file", keyFile)
	p.Wait(t, regexp.MustCompile(`exposed as`), 20*time.Second)

	tc := &tls.Config{RootCAs: pool}
	ka, _ := key.NewPrivate()
	kb, _ := key.NewPrivate()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	log := slog.New(slog.DiscardHandler)
	ca, err := Dial(ctx, url, ka.Public().String(), bound(ka.Public().String()), tc, log)
	if err != nil {
		t.Fatal(err)
	}
	defer ca.Close()
	cb, err := Dial(ctx, url, kb.Public().String(), bound(kb.Public().String()), tc, log)
	if err != nil {
		t.Fatal(err)
	}
	defer cb.Close()
	if ca.Transport() != "ws" {
		t.Fatalf("transport %s", ca.Transport())
	}
	errs := make(chan error, 1)
	var pb *PeerConn
	go func() {
		var err error
		pb, err = cb.OpenConn(ctx, ka.Public().String())
		errs <- err
	}()
	pa, err := ca.OpenConn(ctx, kb.Public().String())
	if err != nil || <-errs != nil {
		t.Fatalf("open: %v", err)
	}
	if _, err := pa.Write([]byte("over tls")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	if n, err := pb.Read(buf); err != nil || string(buf[:n]) != "over tls" {
		t.Fatalf("got %q %v", buf[:n], err)
	}
}
