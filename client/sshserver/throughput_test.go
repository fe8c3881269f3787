package sshserver_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/key"
)

// BenchmarkSessionUpload is the server's side of a copy: the client
// streams 64 MiB into `cat > /dev/null` over loopback (bench/ssh_test.go
// measures copies over the mesh, beside the tunnel's own TCP).
func BenchmarkSessionUpload(b *testing.B) {
	if os.Getuid() != 0 {
		b.Skip("logs in as root")
	}
	signer := func() ssh.Signer {
		k, err := key.NewPrivate()
		if err != nil {
			b.Fatal(err)
		}
		s, err := sshserver.HostKey(k)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	host, client, local := signer(), signer(), netip.MustParseAddr("127.0.0.1")
	srv := sshserver.New(sshserver.Options{HostKey: host, AllowRoot: true, Overlay: netip.MustParsePrefix("127.0.0.0/8")})
	srv.SetAccess(&sshserver.Access{Peers: []sshserver.Peer{{Name: "a.mesh", IP: local, Key: client.PublicKey()}},
		Rules: []acl.Rule{{Peer: local, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}}})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv.Serve(ln)
	defer srv.Close()
	data := make([]byte, 64<<20)
	// OpenSSH asks for chacha20-poly1305 first; x/crypto/ssh (and so
	// `netbird ssh`) for aes128-gcm.
	for _, cipher := range []string{ssh.CipherAES128GCM, ssh.CipherChaCha20Poly1305} {
		b.Run(cipher, func(b *testing.B) {
			c, err := ssh.Dial("tcp", ln.Addr().String(), &ssh.ClientConfig{User: "root", Auth: []ssh.AuthMethod{ssh.PublicKeys(client)},
				HostKeyCallback: ssh.FixedHostKey(host.PublicKey()), Config: ssh.Config{Ciphers: []string{cipher}}})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			b.SetBytes(int64(len(data)))
			for b.Loop() {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				var out bytes.Buffer
				code, err := sshclient.Run(ctx, c, sshclient.Session{Command: "cat > /dev/null", Stdin: bytes.NewReader(data), Stdout: &out, Stderr: io.Discard})
				cancel()
				if err != nil || code != 0 {
					b.Fatalf("exit %d: %v %s", code, err, out.String())
				}
			}
		})
	}
}
