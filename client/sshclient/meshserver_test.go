package sshclient

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/sshserver"
)

// TestMeshServer: the identification lines of our server (plain and
// taking NetBird's JWT logins) and of NetBird's are a mesh agent's;
// OpenSSH's, Dropbear's and look-alikes are not; only ports 22 and 22022
// are the agent's.
func TestMeshServer(t *testing.T) {
	for v, want := range map[string]bool{
		"SSH-2.0-wiremesh":   true,
		"SSH-2.0-wiremesh\r": true,
		"SSH-2.0-NetBird-SSH-Server-wiremesh NetBird-JWT-Required":    true,
		"SSH-2.0-NetBird-SSH-Server-0.77.1":                           true,
		"SSH-2.0-NetBird-SSH-Server-development NetBird-JWT-Required": true,
		"SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3":                      false,
		"SSH-2.0-OpenSSH_9.2p1 wiremesh":                              false,
		"SSH-2.0-dropbear_2022.83":                                    false,
		"SSH-2.0-wiremesh2":                                           false,
		"SSH-2.0-NetBird-SSH-Proxy-0.77.1":                            false,
		"SSH-1.99-wiremesh":                                           false,
		"wiremesh":                                                    false,
		"":                                                            false,
	} {
		if got := MeshServer(v); got != want {
			t.Errorf("MeshServer(%q) = %v, want %v", v, got, want)
		}
	}
	if meshPort != sshserver.Port || meshInternalPort != sshserver.InternalPort {
		t.Fatalf("ports %d, %d; the server listens on %d, %d", meshPort, meshInternalPort, sshserver.Port, sshserver.InternalPort)
	}
	for port, want := range map[int]bool{22: true, 22022: true, 2222: false, 0: false, 80: false} {
		if MeshPort(port) != want {
			t.Errorf("MeshPort(%d) = %v", port, !want)
		}
	}
	if got := PrintableVersion("SSH-2.0-evil\x1b]0;x\x07\xff\r"); got != "SSH-2.0-evil?]0;x??" {
		t.Errorf("PrintableVersion = %q", got)
	}
}

// TestHostKeyErrorServerVersion: a host key mismatch carries the
// server's identification line, read off the real handshake: our own
// server's (both forms) is a mesh agent's, another SSH server's is not.
func TestHostKeyErrorServerVersion(t *testing.T) {
	mapKey, client := tapSigner(t, "ed25519"), tapSigner(t, "ed25519")
	dialErr := func(addr string) *HostKeyError {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := Dial(ctx, addr, "alice", client, mapKey.PublicKey())
		var he *HostKeyError
		if !errors.As(err, &he) {
			t.Fatalf("%s: got %v, want a HostKeyError", addr, err)
		}
		return he
	}

	// Another SSH server (as OpenSSH would answer on a host's port 22).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		cfg := &ssh.ServerConfig{NoClientAuth: true, ServerVersion: "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3"}
		cfg.AddHostKey(tapSigner(t, "ed25519"))
		_, _, _, _ = ssh.NewServerConn(c, cfg)
	}()
	he := dialErr(ln.Addr().String())
	<-done
	if he.ServerVersion != "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3" || MeshServer(he.ServerVersion) {
		t.Fatalf("OpenSSH's line read as %q", he.ServerVersion)
	}

	// Our server, with a host key other than the map's, without and with
	// NetBird's JWT logins (which change its line).
	for _, jwt := range []bool{false, true} {
		srv := sshserver.New(sshserver.Options{HostKey: tapSigner(t, "ed25519"), Overlay: netip.MustParsePrefix("127.0.0.0/8")})
		a := &sshserver.Access{AllowAll: true}
		if jwt {
			a.JWT = &sshserver.JWTAuth{}
		}
		srv.SetAccess(a)
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv.Serve(ln)
		he := dialErr(ln.Addr().String())
		srv.Close()
		if !MeshServer(he.ServerVersion) {
			t.Errorf("our server (jwt %v) identifies as %q: not recognised as a mesh agent's", jwt, he.ServerVersion)
		}
	}
}
