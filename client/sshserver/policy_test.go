package sshserver_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
)

// TestNoPolicy: a map peer without a tcp/22 policy (the firewall lets it
// reach the port) is refused before any key is looked at, told why in one
// banner whatever it presents, and each connection is audited as one
// Refused event with that reason; no session runs. A peer with a policy
// is unaffected, and its usual "none" first try is not audited.
func TestNoPolicy(t *testing.T) {
	log := &auditLog{}
	clock := newClock()
	r := newRigWith(t, func(o *sshserver.Options) { o.Audit = log.add; o.Now = clock.now })
	access := func(rules ...acl.Rule) {
		r.srv.SetAccess(&sshserver.Access{Self: "b.mesh", Rules: rules,
			Peers: []sshserver.Peer{{Name: "a.mesh", IP: r.local, Key: r.client.PublicKey()}}})
	}
	access(acl.Rule{Peer: r.local, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80})
	const want = "wiremesh: no policy lets peer a.mesh (127.0.0.1) reach b.mesh on tcp/22"
	ctx := context.Background()

	// Its own key, another key: the same refusal, said once.
	// One connection at a time per source, one handshake per 10 s
	// (TestNoPolicyLimits): each next one waits for the last one's end
	// (its refusal audited) and moves the clock on.
	next := func(refused int) {
		log.wait(t, "the last connection's refusal", func(evs []sshserver.Event) bool {
			return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.Refused }) == refused
		})
		clock.later()
	}
	for i, k := range []ssh.Signer{r.client, signer(t)} {
		next(i)
		start := time.Now()
		c, err := sshclient.Dial(ctx, r.addr, r.user, k, r.host.PublicKey())
		if err == nil {
			c.Close()
			t.Fatal("a peer without a policy logged in")
		}
		if !strings.HasPrefix(err.Error(), want+": ") || strings.Count(err.Error(), "no policy") != 1 {
			t.Errorf("client error %q, want it to start with %q", err, want)
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Errorf("refusal took %v", took)
		}
	}
	// Several keys (OpenSSH tries each): one banner.
	var banners []string
	cfg := &ssh.ClientConfig{User: r.user, HostKeyCallback: ssh.FixedHostKey(r.host.PublicKey()),
		Auth:           []ssh.AuthMethod{ssh.PublicKeys(signer(t), r.client, signer(t))},
		BannerCallback: func(m string) error { banners = append(banners, m); return nil }}
	next(2)
	if c, err := ssh.Dial("tcp", r.addr, cfg); err == nil {
		c.Close()
		t.Fatal("a peer without a policy logged in with several keys")
	}
	if len(banners) != 1 || banners[0] != want+"\n" {
		t.Errorf("banners %q, want one %q", banners, want+"\n")
	}
	evs := log.wait(t, "three refusals", func(evs []sshserver.Event) bool {
		return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.Refused }) == 3
	})
	for _, e := range evs {
		if e.Type != sshserver.Refused || e.Source != r.local || e.User != r.user || e.Kind != sshserver.KindNone ||
			e.Reason != strings.TrimPrefix(want, "wiremesh: ") {
			t.Errorf("event %+v, want only Refused from %s as %s with reason %q", e, r.local, r.user, strings.TrimPrefix(want, "wiremesh: "))
		}
	}

	// A refused client that lingers (here: still reading the banner) is
	// cut after a grace, freeing its pre-authentication slot: the
	// refusal is audited while the client still holds the connection.
	access(acl.Rule{Peer: r.local, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80})
	var cutIn time.Duration
	cfg = &ssh.ClientConfig{User: r.user, HostKeyCallback: ssh.FixedHostKey(r.host.PublicKey()), Auth: []ssh.AuthMethod{ssh.PublicKeys(r.client)},
		BannerCallback: func(string) error {
			start := time.Now()
			log.wait(t, "the lingering client's refusal", func(evs []sshserver.Event) bool {
				return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.Refused }) == 4
			})
			cutIn = time.Since(start)
			return nil
		}}
	next(3)
	if c, err := ssh.Dial("tcp", r.addr, cfg); err == nil {
		c.Close()
		t.Fatal("the lingering client logged in")
	}
	if cutIn > 4*time.Second {
		t.Errorf("a refused connection was cut after %v", cutIn)
	}

	// One that says nothing at all is cut after refusedHandshake (5 s),
	// not the 20 s others get.
	next(4)
	raw, err := net.Dial("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = raw.SetReadDeadline(start.Add(15 * time.Second))
	_, err = io.Copy(io.Discard, raw) // the server's version line, then its close
	raw.Close()
	if took := time.Since(start); err != nil || took > 8*time.Second {
		t.Errorf("a silent connection without a policy: %v after %v, want closed by the server within 5 s", err, took)
	}

	// With a policy (on the internal port only, as one may have): in,
	// and the client's "none" first try is no refusal.
	access(acl.Rule{Peer: r.local, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: sshserver.InternalPort, PortHi: sshserver.InternalPort})
	c := r.dial(t)
	if code, out, _ := run(t, c, sshclient.Session{Command: "echo in"}); code != 0 || out != "in\n" {
		t.Fatalf("with a policy: %d %q", code, out)
	}
	cfg = &ssh.ClientConfig{User: r.user, HostKeyCallback: ssh.FixedHostKey(r.host.PublicKey())} // "none" only
	if c, err := ssh.Dial("tcp", r.addr, cfg); err == nil {
		c.Close()
		t.Fatal(`"none" logged in`)
	}
	time.Sleep(200 * time.Millisecond)
	if n := count(log.wait(t, "sessions", func([]sshserver.Event) bool { return true }), func(e sshserver.Event) bool { return e.Type == sshserver.Refused }); n != 4 {
		t.Errorf("%d refusals after the allowed peer's logins, want still 4", n)
	}
}

// clock is a test's clock: the real one, moved on by later.
type clock struct{ off atomic.Int64 }

func newClock() *clock { return &clock{} }

func (c *clock) now() time.Time { return time.Now().Add(time.Duration(c.off.Load())) }

// later moves the clock past the no-policy window (10 s).
func (c *clock) later() { c.off.Add(int64(11 * time.Second)) }

// dialFrom opens a TCP connection to addr from the loopback address src.
func dialFrom(t *testing.T, src netip.Addr, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(src, 0)), Timeout: 2 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// handshakeStarted reports whether the server started the SSH handshake
// on c (sent its version line) rather than closing it at accept.
func handshakeStarted(t *testing.T, c net.Conn) bool {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	n, err := c.Read(make([]byte, 8))
	if n == 0 && err != io.EOF && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("connection from %s neither started nor closed: %v", c.LocalAddr(), err)
	}
	return n > 0
}

// TestNoPolicyLimits: map peers no policy lets in (the firewall lets
// them reach the port) never take the pre-authentication slots of peers
// with one: 40 of them connecting at once get 8 slots of their own, and,
// with 28 of the 32 others held too, the peer with a policy still logs
// in. A source is told once per 10 s:
// its next connection within that is closed before the key exchange. A
// peer whose SSH key the map carries unparsed (no key) is told why too.
func TestNoPolicyLimits(t *testing.T) {
	log := &auditLog{}
	clock := newClock()
	r := newRigWith(t, func(o *sshserver.Options) { o.Audit = log.add; o.Now = clock.now })
	a := &sshserver.Access{Self: "b.mesh",
		Rules: []acl.Rule{{Peer: r.local, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}},
		Peers: []sshserver.Peer{{Name: "a.mesh", IP: r.local, Key: r.client.PublicKey()}}}
	var strangers []netip.Addr
	for i := range 40 {
		ip := netip.AddrFrom4([4]byte{127, 0, 0, byte(10 + i)})
		strangers = append(strangers, ip)
		// No key: as a peer whose key did not parse is given.
		a.Peers = append(a.Peers, sshserver.Peer{Name: fmt.Sprintf("n%d.mesh", i), IP: ip})
	}
	// Peers with a policy holding 28 of their 32 slots (4 per source).
	var others []netip.Addr
	for i := range 7 {
		ip := netip.AddrFrom4([4]byte{127, 0, 1, byte(1 + i)})
		others = append(others, ip)
		a.Peers = append(a.Peers, sshserver.Peer{Name: fmt.Sprintf("p%d.mesh", i), IP: ip, Key: signer(t).PublicKey()})
		a.Rules = append(a.Rules, acl.Rule{Peer: ip, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22})
	}
	r.srv.SetAccess(a)
	for _, ip := range others {
		for range 4 {
			if !handshakeStarted(t, dialFrom(t, ip, r.addr)) {
				t.Fatalf("a connection of %s with a policy closed at accept", ip)
			}
		}
	}

	started := 0
	var held []net.Conn
	for _, ip := range strangers {
		c := dialFrom(t, ip, r.addr)
		held = append(held, c)
		if handshakeStarted(t, c) {
			started++
		}
	}
	if started != 8 {
		t.Errorf("%d of 40 connections without a policy started a handshake, want 8", started)
	}
	// Those 8 are still open: the peer with a policy logs in.
	if code, out, _ := run(t, r.dial(t), sshclient.Session{Command: "echo in"}); code != 0 || out != "in\n" {
		t.Fatalf("the peer with a policy: %d %q", code, out)
	}
	for _, c := range held {
		c.Close()
	}

	// A source not let in before, once the slots are free (the server
	// sees the others' ends): told why, in a banner.
	src := strangers[39]
	var nc net.Conn
	for deadline := time.Now().Add(5 * time.Second); nc == nil; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no slot for a peer without a policy after the others closed")
		}
		c := dialFrom(t, src, r.addr)
		_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
		first := make([]byte, 8)
		n, _ := c.Read(first)
		if n > 0 {
			nc = &replayConn{Conn: c, r: io.MultiReader(bytes.NewReader(first[:n]), c)}
		}
	}
	var banners []string
	cfg := &ssh.ClientConfig{User: r.user, HostKeyCallback: ssh.FixedHostKey(r.host.PublicKey()),
		Auth:           []ssh.AuthMethod{ssh.PublicKeys(signer(t))},
		BannerCallback: func(m string) error { banners = append(banners, m); return nil }}
	_ = nc.SetDeadline(time.Now().Add(5 * time.Second))
	if sc, _, _, err := ssh.NewClientConn(nc, r.addr, cfg); err == nil {
		sc.Close()
		t.Fatal("a peer without a policy logged in")
	}
	nc.Close()
	want := "wiremesh: no policy lets peer n39.mesh (127.0.0.49) reach b.mesh on tcp/22\n"
	if len(banners) != 1 || banners[0] != want {
		t.Errorf("banners %q, want %q", banners, want)
	}
	// Its slot is free once its refusal is audited; its next connection
	// within 10 s is closed at once all the same.
	log.wait(t, "the refusal", func(evs []sshserver.Event) bool {
		return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.Refused && e.Source == src }) == 1
	})
	if handshakeStarted(t, dialFrom(t, src, r.addr)) {
		t.Error("a second connection within 10 s of a peer without a policy started a handshake")
	}
	clock.later()
	if !handshakeStarted(t, dialFrom(t, src, r.addr)) {
		t.Error("a connection 10 s later was closed at accept")
	}
}

// replayConn is a connection whose first bytes were read already.
type replayConn struct {
	net.Conn
	r io.Reader
}

func (c *replayConn) Read(p []byte) (int, error) { return c.r.Read(p) }
