package relayclient

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"regexp"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/relaywire"
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

func manager(t *testing.T, url string, cred relaywire.Credentials) (*Manager, string) {
	t.Helper()
	k, _ := key.NewPrivate()
	pub := k.Public().String()
	m := NewManager(pub, nil, slog.New(slog.DiscardHandler))
	t.Cleanup(m.Close)
	m.Update([]string{url}, cred)
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
	cred := relaywire.Issue(secret, time.Now().Add(time.Hour))
	a, pubA := manager(t, url, cred)
	b, pubB := manager(t, url, cred)
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
	cred := relaywire.Issue(secret, time.Now().Add(time.Hour))
	a, _ := manager(t, url, cred)
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
	m.Update([]string{url}, cred)
	if err := <-opened; err != nil {
		t.Fatalf("open after the peer came: %v", err)
	}
}

func TestBadTokenRefused(t *testing.T) {
	url := startRelay(t)
	for name, cred := range map[string]relaywire.Credentials{
		"expired": relaywire.Issue(secret, time.Now().Add(-time.Minute)),
		"forged":  relaywire.Issue("not-the-secret", time.Now().Add(time.Hour)),
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
