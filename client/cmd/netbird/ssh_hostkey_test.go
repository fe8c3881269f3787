package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
)

func edSigner(t *testing.T) ssh.Signer {
	t.Helper()
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

// forgingServers serves, on loopback, an SSH server identifying as
// OpenSSH and our own SSH server, each with a host key of its own (not
// the map's); it returns their addresses and our server's key.
func forgingServers(t *testing.T) (openssh, ours string, oursKey ssh.PublicKey) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	other := edSigner(t)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				cfg := &ssh.ServerConfig{NoClientAuth: true, ServerVersion: "SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3"}
				cfg.AddHostKey(other)
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				_, _, _, _ = ssh.NewServerConn(c, cfg)
			}()
		}
	}()
	hk := edSigner(t)
	srv := sshserver.New(sshserver.Options{HostKey: hk, Overlay: netip.MustParsePrefix("127.0.0.0/8")})
	srv.SetAccess(&sshserver.Access{AllowAll: true})
	ln2, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(ln2)
	t.Cleanup(srv.Close)
	return ln.Addr().String(), ln2.Addr().String(), hk.PublicKey()
}

// TestSSHHostKeyMismatch: `netbird ssh` reports a host key other than
// the map's only when a mesh agent's SSH server (by its identification
// line) presents it on port 22 or 22022. Another SSH server (the host's
// own OpenSSH holding 22, a server on 2222) is said to be one, with the
// port to try, and nothing is reported; our server on another port is
// refused as a mismatch but not reported. The keys and lines are those
// of real handshakes.
func TestSSHHostKeyMismatch(t *testing.T) {
	openssh, ours, _ := forgingServers(t)
	mapKey, client := edSigner(t), edSigner(t)
	tgt := sshTarget{name: "b.netbird.selfhosted", ip: "127.0.0.1", hostKey: mapKey.PublicKey()}
	mismatch := func(addr string) *sshclient.HostKeyError {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := sshclient.Dial(ctx, addr, "alice", client, mapKey.PublicKey())
		var he *sshclient.HostKeyError
		if !errors.As(err, &he) {
			t.Fatalf("%s: %v, want a host key mismatch", addr, err)
		}
		return he
	}
	fromOpenSSH, fromOurs := mismatch(openssh), mismatch(ours)
	for _, tc := range []struct {
		name   string
		he     *sshclient.HostKeyError
		port   int
		report bool
		says   []string
	}{
		{"host's OpenSSH on 22", fromOpenSSH, 22, false, []string{
			"ssh alice@b.netbird.selfhosted (addr): port 22 of b.netbird.selfhosted is served by another SSH server (SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3), not b.netbird.selfhosted's wiremesh SSH server; try -p 22022"}},
		{"OpenSSH on 2222", fromOpenSSH, 2222, false, []string{"port 2222 of b.netbird.selfhosted is served by another SSH server", "try -p 22022"}},
		{"OpenSSH on 22022", fromOpenSSH, 22022, false, []string{"port 22022 of b.netbird.selfhosted is served by another SSH server (SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3), not b.netbird.selfhosted's wiremesh SSH server"}},
		{"ours on 22", fromOurs, 22, true, []string{"intercepting", ssh.FingerprintSHA256(fromOurs.Presented), "REPORTED"}},
		{"ours on 22022", fromOurs, 22022, true, []string{"intercepting", "REPORTED"}},
		{"ours on 2222", fromOurs, 2222, false, []string{"intercepting", "not reported to management's activity log: port 2222 is not an SSH port of b.netbird.selfhosted's agent (22 or 22022)"}},
	} {
		reports := 0
		err := hostKeyMismatchError("alice", tgt, "addr", tc.port, tc.he, func() string { reports++; return "REPORTED" })
		if reports != map[bool]int{true: 1}[tc.report] {
			t.Errorf("%s: reported %d times, want report %v", tc.name, reports, tc.report)
		}
		for _, want := range tc.says {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %v lacks %q", tc.name, err, want)
			}
		}
		if !tc.report && strings.Contains(err.Error(), "REPORTED") {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if strings.Contains(hostKeyMismatchError("alice", tgt, "addr", 22022, fromOpenSSH, func() string { return "" }).Error(), "try -p") {
		t.Error("on 22022 the hint names the port already used")
	}
}

// tapConn hands what the server sends to a tap as it is read, as `netbird
// ssh proxy` copies it to OpenSSH.
type tapConn struct {
	net.Conn
	tap *sshclient.KexTap
}

func (c tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	_, _ = c.tap.Write(p[:n])
	return n, err
}

// TestSSHProxyHostKeyMismatch: `netbird ssh proxy`'s tap reports a host
// key other than the map's only when a mesh agent's server presents it
// on 22 or 22022; another SSH server is named as such on stderr and not
// reported; the map's own key says nothing.
func TestSSHProxyHostKeyMismatch(t *testing.T) {
	openssh, ours, oursKey := forgingServers(t)
	mapKey := edSigner(t)
	tgt := sshTarget{name: "b.netbird.selfhosted", ip: "127.0.0.1", hostKey: mapKey.PublicKey()}
	run := func(addr string, port int, expected ssh.PublicKey) (reports int, stderr string) {
		t.Helper()
		var w bytes.Buffer
		tg := tgt
		tg.hostKey = expected
		tap := proxyTap(&w, tg, port, func(ssh.PublicKey) string { reports++; return "REPORTED" })
		c, err := net.DialTimeout("tcp", addr, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		// OpenSSH on the other end: it refuses the key too (it is not the
		// map's), after the tap saw it.
		cfg := &ssh.ClientConfig{User: "alice", HostKeyCallback: ssh.FixedHostKey(expected), Timeout: 10 * time.Second}
		_, _, _, _ = ssh.NewClientConn(tapConn{Conn: c, tap: tap}, addr, cfg)
		if !tap.Done() {
			t.Fatalf("%s: the tap saw no host key", addr)
		}
		return reports, w.String()
	}
	if n, out := run(openssh, 22, mapKey.PublicKey()); n != 0 ||
		out != "netbird ssh proxy: port 22 of b.netbird.selfhosted is served by another SSH server (SSH-2.0-OpenSSH_9.2p1 Debian-2+deb12u3), not b.netbird.selfhosted's wiremesh SSH server; try -p 22022\n" {
		t.Errorf("OpenSSH on 22: %d reports, stderr %q", n, out)
	}
	if n, out := run(ours, 22, mapKey.PublicKey()); n != 1 || !strings.Contains(out, "presented host key") || !strings.HasSuffix(out, "; REPORTED\n") {
		t.Errorf("ours on 22: %d reports, stderr %q", n, out)
	}
	if n, out := run(ours, 22022, mapKey.PublicKey()); n != 1 || !strings.HasSuffix(out, "; REPORTED\n") {
		t.Errorf("ours on 22022: %d reports, stderr %q", n, out)
	}
	if n, out := run(ours, 2222, mapKey.PublicKey()); n != 0 || !strings.Contains(out, "presented host key") || !strings.Contains(out, "not reported") {
		t.Errorf("ours on 2222: %d reports, stderr %q", n, out)
	}
	if n, out := run(ours, 22, oursKey); n != 0 || out != "" {
		t.Errorf("the map's own key: %d reports, stderr %q", n, out)
	}
}
