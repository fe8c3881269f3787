package sshserver_test

import (
	"context"
	"io"
	"net"
	"strings"
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
	r := newRigWith(t, func(o *sshserver.Options) { o.Audit = log.add })
	access := func(rules ...acl.Rule) {
		r.srv.SetAccess(&sshserver.Access{Self: "b.mesh", Rules: rules,
			Peers: []sshserver.Peer{{Name: "a.mesh", IP: r.local, Key: r.client.PublicKey()}}})
	}
	access(acl.Rule{Peer: r.local, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80})
	const want = "wiremesh: no policy lets peer a.mesh (127.0.0.1) reach b.mesh on tcp/22"
	ctx := context.Background()

	// Its own key, another key: the same refusal, said once.
	for _, k := range []ssh.Signer{r.client, signer(t)} {
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
	if c, err := ssh.Dial("tcp", r.addr, cfg); err == nil {
		c.Close()
		t.Fatal("the lingering client logged in")
	}
	if cutIn > 4*time.Second {
		t.Errorf("a refused connection was cut after %v", cutIn)
	}

	// One that says nothing at all is cut after refusedHandshake (5 s),
	// not the 20 s others get.
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
