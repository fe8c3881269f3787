package sshclient

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func newSigner(t *testing.T) ssh.Signer {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// serve runs an SSH server that completes handshakes (no channels) until
// the test ends.
func serve(t *testing.T, cfg *ssh.ServerConfig) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				sc, chans, reqs, err := ssh.NewServerConn(c, cfg)
				if err != nil {
					return
				}
				go ssh.DiscardRequests(reqs)
				go func() {
					for nc := range chans {
						_ = nc.Reject(ssh.Prohibited, "none")
					}
				}()
				_ = sc.Wait()
			}()
		}
	}()
	return ln.Addr().String()
}

// TestDialWithToken: against a NetBird server that takes only a token as
// the password, the token is fetched and sent; a server that takes the
// key never makes the client ask for a token; one of our agents that
// refuses the key is not sent a login either.
func TestDialWithToken(t *testing.T) {
	host, client := newSigner(t), newSigner(t)
	var got atomic.Value
	official := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-NetBird-SSH-Server-0.77.1 NetBird-JWT-Required",
		PasswordCallback: func(_ ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			got.Store(string(pw))
			if string(pw) != "the-token" {
				return nil, errors.New("bad token")
			}
			return nil, nil
		},
	}
	official.AddHostKey(host)
	keyed := &ssh.ServerConfig{
		ServerVersion: "SSH-2.0-NetBird-SSH-Server-wiremesh NetBird-JWT-Required",
		PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
			if string(k.Marshal()) != string(client.PublicKey().Marshal()) {
				return nil, errors.New("unknown key")
			}
			return nil, nil
		},
		PasswordCallback: official.PasswordCallback,
	}
	keyed.AddHostKey(host)

	asked := 0
	token := func(context.Context) (string, error) { asked++; return "the-token", nil }
	ctx := context.Background()

	c, err := DialWithToken(ctx, serve(t, official), "root", client, host.PublicKey(), token)
	if err != nil {
		t.Fatalf("official server with a token: %v", err)
	}
	c.Close()
	if asked != 1 || got.Load() != "the-token" {
		t.Fatalf("token asked %d times, server got %v", asked, got.Load())
	}
	if _, err := DialWithToken(ctx, serve(t, official), "root", client, host.PublicKey(), nil); err == nil {
		t.Fatal("official server without a token: logged in")
	}

	asked = 0
	ours := serve(t, keyed)
	c, err = DialWithToken(ctx, ours, "root", client, host.PublicKey(), token)
	if err != nil {
		t.Fatalf("our server with our key: %v", err)
	}
	c.Close()
	if asked != 0 {
		t.Fatalf("token asked %d times though the key was accepted", asked)
	}
	if _, err := DialWithToken(ctx, ours, "root", newSigner(t), host.PublicKey(), token); err == nil || asked != 0 {
		t.Fatalf("our server refusing the key: %v, token asked %d times", err, asked)
	} else if !strings.Contains(err.Error(), "refused this peer's SSH key") {
		t.Errorf("error %v", err)
	}
}
