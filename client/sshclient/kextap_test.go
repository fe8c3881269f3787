package sshclient

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/binary"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
)

func tapSigner(t testing.TB, kind string) ssh.Signer {
	t.Helper()
	var priv any
	var err error
	switch kind {
	case "ecdsa":
		priv, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	case "rsa":
		priv, err = rsa.GenerateKey(rand.Reader, 2048)
	default:
		_, priv, err = ed25519.GenerateKey(rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// handshake runs a real SSH handshake with kex and the server's host key
// hk, and returns the bytes the server sent.
func handshake(t testing.TB, kex string, hk ssh.Signer) []byte {
	t.Helper()
	// TCP, not net.Pipe: both sides write their version line first.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close()
	var rec bytes.Buffer
	var mu sync.Mutex
	tapped := &recConn{Conn: cc, rec: &rec, mu: &mu}
	scfg := &ssh.ServerConfig{NoClientAuth: true, Config: ssh.Config{KeyExchanges: []string{kex}}}
	scfg.AddHostKey(hk)
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, chans, reqs, err := ssh.NewServerConn(sc, scfg)
		if err != nil {
			return
		}
		go ssh.DiscardRequests(reqs)
		go func() {
			for ch := range chans {
				_ = ch.Reject(ssh.Prohibited, "no")
			}
		}()
		_ = c.Wait()
	}()
	ccfg := &ssh.ClientConfig{User: "alice", HostKeyCallback: ssh.FixedHostKey(hk.PublicKey()), Config: ssh.Config{KeyExchanges: []string{kex}},
		HostKeyAlgorithms: []string{hk.PublicKey().Type()}, Timeout: 10 * time.Second}
	if hk.PublicKey().Type() == ssh.KeyAlgoRSA {
		ccfg.HostKeyAlgorithms = []string{ssh.KeyAlgoRSASHA256}
	}
	c, chans, reqs, err := ssh.NewClientConn(tapped, "pipe", ccfg)
	if err != nil {
		t.Fatalf("%s: %v", kex, err)
	}
	_ = ssh.NewClient(c, chans, reqs).Close()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return append([]byte(nil), rec.Bytes()...)
}

// recConn records what is read from the server.
type recConn struct {
	net.Conn
	rec *bytes.Buffer
	mu  *sync.Mutex
}

func (r *recConn) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	r.mu.Lock()
	r.rec.Write(p[:n])
	r.mu.Unlock()
	return n, err
}

// TestKexTap: from the server's bytes of real handshakes (each key
// exchange x/crypto speaks, group exchange included; ed25519, ECDSA and
// RSA host keys), fed in pieces of every size, the tap finds the host
// key the server presented, exactly once, and stops there; garbage
// and oversized input stop it without a key.
func TestKexTap(t *testing.T) {
	ed := tapSigner(t, "ed25519")
	cases := []struct {
		kex string
		hk  ssh.Signer
	}{
		{"curve25519-sha256", ed},
		{"mlkem768x25519-sha256", ed},
		{"ecdh-sha2-nistp256", tapSigner(t, "ecdsa")},
		{"diffie-hellman-group14-sha256", tapSigner(t, "rsa")},
		{"diffie-hellman-group-exchange-sha256", ed},
	}
	for _, tc := range cases {
		stream := handshake(t, tc.kex, tc.hk)
		if os.Getenv("WIREMESH_WRITE_SEEDS") != "" {
			writeSeed(t, tc.kex, stream)
		}
		for _, chunk := range []int{1, 7, 100, len(stream)} {
			var got []ssh.PublicKey
			tap := &KexTap{HostKey: func(k ssh.PublicKey) { got = append(got, k) }}
			for i := 0; i < len(stream); i += chunk {
				if n, err := tap.Write(stream[i:min(i+chunk, len(stream))]); err != nil || n != min(chunk, len(stream)-i) {
					t.Fatalf("%s: Write = %d, %v", tc.kex, n, err)
				}
			}
			if len(got) != 1 || !bytes.Equal(got[0].Marshal(), tc.hk.PublicKey().Marshal()) {
				t.Fatalf("%s in chunks of %d: %d keys found, want the server's once", tc.kex, chunk, len(got))
			}
			if !tap.Done() {
				t.Fatalf("%s: the tap did not stop", tc.kex)
			}
		}
	}
	for name, in := range map[string][]byte{
		"no version line": bytes.Repeat([]byte("x"), 300),
		"huge packet":     append([]byte("SSH-2.0-x\r\n"), 0xff, 0xff, 0xff, 0xff, 0),
		"padding too big": append([]byte("SSH-2.0-x\r\n"), 0, 0, 0, 8, 9, 31, 0, 0, 0, 0, 0, 0),
	} {
		called := false
		tap := &KexTap{HostKey: func(ssh.PublicKey) { called = true }}
		_, _ = tap.Write(in)
		if !tap.Done() || called {
			t.Errorf("%s: done %v, key found %v", name, tap.Done(), called)
		}
	}
	tap := &KexTap{}
	for range 300 {
		_, _ = tap.Write(make([]byte, 1024))
	}
	if !tap.Done() || tap.buf != nil {
		t.Fatal("the tap kept reading past its bound")
	}
}

func writeSeed(t testing.TB, name string, b []byte) {
	dir := filepath.Join("testdata", "fuzz", "FuzzKexTap")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var s bytes.Buffer
	s.WriteString("go test fuzz v1\n[]byte(")
	s.WriteString(quote(b))
	s.WriteString(")\n")
	if err := os.WriteFile(filepath.Join(dir, name), s.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func quote(b []byte) string {
	var s bytes.Buffer
	s.WriteByte('"')
	for _, c := range b {
		switch {
		case c == '"' || c == '\\':
			s.WriteByte('\\')
			s.WriteByte(c)
		case c >= 0x20 && c < 0x7f:
			s.WriteByte(c)
		default:
			const hex = "0123456789abcdef"
			s.WriteString(`\x`)
			s.WriteByte(hex[c>>4])
			s.WriteByte(hex[c&15])
		}
	}
	s.WriteByte('"')
	return s.String()
}

// FuzzKexTap: whatever a server sends, the tap takes all of it without
// error or panic, finds at most a key per packet, and keeps no more than
// its bound. Seeds (testdata/fuzz/FuzzKexTap) are real handshakes of
// each key exchange (WIREMESH_WRITE_SEEDS=1 go test -run TestKexTap
// writes them again).
func FuzzKexTap(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		keys := 0
		tap := &KexTap{HostKey: func(ssh.PublicKey) { keys++ }}
		for i := 0; i < len(b); i += 13 {
			if n, err := tap.Write(b[i:min(i+13, len(b))]); err != nil || n != min(13, len(b)-i) {
				t.Fatalf("Write = %d, %v", n, err)
			}
		}
		if keys > len(b)/5 || len(tap.buf) > maxTapped {
			t.Fatalf("%d keys from %d bytes, %d buffered", keys, len(b), len(tap.buf))
		}
	})
}

// TestKexTapFirstKeyOnly: a hostile server sending key exchange replies
// over and over before NEWKEYS gets the callback called once, for the
// first key, and the tap stops reading there; the server's version line
// is kept (without CR LF) for telling a mesh agent's server from others.
func TestKexTapFirstKeyOnly(t *testing.T) {
	first, other := tapSigner(t, "ed25519").PublicKey(), tapSigner(t, "ed25519").PublicKey()
	packet := func(payload []byte) []byte {
		const pad = 4
		b := binary.BigEndian.AppendUint32(nil, uint32(1+len(payload)+pad))
		b = append(b, pad)
		b = append(b, payload...)
		return append(b, make([]byte, pad)...)
	}
	reply := func(k ssh.PublicKey) []byte {
		return packet(append([]byte{msgKexReply}, ssh.Marshal(struct{ K []byte }{k.Marshal()})...))
	}
	stream := []byte("SSH-2.0-OpenSSH_9.2p1 Debian-2\r\n")
	stream = append(stream, reply(first)...)
	for range 1000 {
		stream = append(stream, reply(other)...)
	}
	stream = append(stream, packet([]byte{msgNewKeys})...)
	for _, chunk := range []int{1, 64, len(stream)} {
		var got []ssh.PublicKey
		tap := &KexTap{HostKey: func(k ssh.PublicKey) { got = append(got, k) }}
		for i := 0; i < len(stream); i += chunk {
			_, _ = tap.Write(stream[i:min(i+chunk, len(stream))])
		}
		if len(got) != 1 || !bytes.Equal(got[0].Marshal(), first.Marshal()) {
			t.Fatalf("chunks of %d: %d keys reported, want the first once", chunk, len(got))
		}
		if !tap.Done() || tap.buf != nil {
			t.Fatalf("chunks of %d: the tap kept reading after the first key", chunk)
		}
		if v := tap.ServerVersion(); v != "SSH-2.0-OpenSSH_9.2p1 Debian-2" {
			t.Fatalf("chunks of %d: server version %q", chunk, v)
		}
	}
	// A real handshake: the version is our server's, as sent.
	stream = handshake(t, "curve25519-sha256", tapSigner(t, "ed25519"))
	tap := &KexTap{}
	_, _ = tap.Write(stream)
	if v := tap.ServerVersion(); v != "SSH-2.0-Go" {
		t.Fatalf("version of x/crypto's server read as %q", v)
	}
}
