package sshclient

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

// TestDialForgedHostKey: a server presenting another host key than the
// map's is refused before any login, with an error naming both
// fingerprints and carrying the key presented (netbird ssh reports it).
func TestDialForgedHostKey(t *testing.T) {
	signerOf := func() ssh.Signer {
		_, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		s, err := ssh.NewSignerFromKey(priv)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	forged, mapKey, client := signerOf(), signerOf(), signerOf()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	authTried := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		cfg := &ssh.ServerConfig{PublicKeyCallback: func(ssh.ConnMetadata, ssh.PublicKey) (*ssh.Permissions, error) {
			authTried <- struct{}{}
			return nil, errors.New("no")
		}}
		cfg.AddHostKey(forged)
		_, _, _, _ = ssh.NewServerConn(c, cfg)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = Dial(ctx, ln.Addr().String(), "alice", client, mapKey.PublicKey())
	var he *HostKeyError
	if !errors.As(err, &he) || !errors.Is(err, ErrHostKey) {
		t.Fatalf("got %v, want a HostKeyError", err)
	}
	if string(he.Presented.Marshal()) != string(forged.PublicKey().Marshal()) || string(he.Expected.Marshal()) != string(mapKey.PublicKey().Marshal()) {
		t.Fatal("HostKeyError does not carry the presented and expected keys")
	}
	for _, want := range []string{ssh.FingerprintSHA256(forged.PublicKey()), ssh.FingerprintSHA256(mapKey.PublicKey()), "intercepting"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	<-done
	select {
	case <-authTried:
		t.Fatal("the client offered its key to a server with a forged host key")
	default:
	}
}
