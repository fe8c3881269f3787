package e2e

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

const mgmtPort = "33073"

type agent struct {
	name, ns, dir, sock, iface string
	daemon                     *proctest.Proc
}

type statusJSON struct {
	NetbirdIP string `json:"netbirdIp"`
	PublicKey string `json:"publicKey"`
	Peers     struct {
		Total, Connected int
		Details          []struct {
			NetbirdIP        string                         `json:"netbirdIp"`
			Status           string                         `json:"status"`
			ConnectionType   string                         `json:"connectionType"`
			IceCandidateType struct{ Local, Remote string } `json:"iceCandidateType"`
		} `json:"details"`
	} `json:"peers"`
	Management struct{ Connected bool } `json:"management"`
	Signal     struct{ Connected bool } `json:"signal"`
}

type mesh struct {
	t       *testing.T
	lab     *netlab.Lab
	dataDir string
	key     string
}

func newMesh(t *testing.T) *mesh {
	lab := netlab.New(t)
	m := &mesh{t: t, lab: lab, dataDir: t.TempDir()}
	srv := proctest.StartCmd(t, lab.Cmd(lab.NS("pub"), proctest.Binary(t, "netbird-server"), "--datadir", m.dataDir,
		"--listen", netlab.PubAddr+":"+mgmtPort, "--stun-port", "3478", "--public-address", netlab.PubAddr), nil)
	srv.Wait(t, regexp.MustCompile(`setup-keys create`), 20*time.Second)
	out, err := proctest.Run(t, "netbird-server", "admin", "--datadir", m.dataDir, "setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("create key: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	m.key = lines[len(lines)-1]
	return m
}

func (m *mesh) agent(name string, kind netlab.NAT) *agent {
	t := m.t
	ns, _ := m.lab.Site(name, kind)
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	a := &agent{name: name, ns: ns, dir: dir, sock: "unix://" + filepath.Join(dir, "daemon.sock"), iface: m.lab.Prefix + name}
	a.daemon = proctest.StartCmd(t, m.lab.Cmd(ns, proctest.Binary(t, "netbird"), "service", "run", "--daemon-addr", a.sock, "-l", "debug"),
		[]string{"NB_STATE_DIR=" + dir})
	a.daemon.Wait(t, regexp.MustCompile(`daemon listening`), 10*time.Second)
	return a
}

func (m *mesh) cli(a *agent, args ...string) (string, error) {
	cmd := m.lab.Cmd(a.ns, append([]string{proctest.Binary(m.t, "netbird"), "--daemon-addr", a.sock}, args...)...)
	cmd.Env = append(os.Environ(), "NB_STATE_DIR="+a.dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func (m *mesh) up(a *agent) time.Time {
	start := time.Now()
	out, err := m.cli(a, "up", "-m", "http://"+netlab.PubAddr+":"+mgmtPort, "-k", m.key, "-n", a.name, "--interface-name", a.iface)
	if err != nil || !strings.Contains(out, "Connected") {
		m.t.Fatalf("%s: netbird up: %v\n%s", a.name, err, out)
	}
	return start
}

func (m *mesh) status(a *agent) statusJSON {
	out, err := m.cli(a, "status", "--json")
	if err != nil {
		m.t.Fatalf("%s status: %v\n%s", a.name, err, out)
	}
	var s statusJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		m.t.Fatalf("%s status json: %v\n%s", a.name, err, out)
	}
	return s
}

func ipOf(s statusJSON) string { ip, _, _ := strings.Cut(s.NetbirdIP, "/"); return ip }

func (m *mesh) ping(from *agent, ip string) bool {
	_, err := m.lab.Exec(from.ns, "ping", "-c", "1", "-W", "1", ip)
	return err == nil
}

func (m *mesh) waitPing(from *agent, ip string, within time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < within {
		if m.ping(from, ip) {
			return time.Since(start), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start), false
}

// tcpTransfer sends size random bytes from one namespace to an overlay IP
// listening in another, and checks they arrive intact.
func (m *mesh) tcpTransfer(from, to *agent, toIP string, size int) error {
	var ln net.Listener
	if err := netlab.Do(to.ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", toIP+":0")
		return err
	}); err != nil {
		return err
	}
	defer ln.Close()
	data := make([]byte, size)
	_, _ = rand.Read(data)
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	var c net.Conn
	if err := netlab.Do(from.ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", ln.Addr().String(), 5*time.Second)
		return err
	}); err != nil {
		return err
	}
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(data); err != nil {
		c.Close()
		return err
	}
	c.Close()
	if b := <-got; !bytes.Equal(b, data) {
		return fmt.Errorf("received %d of %d bytes intact", len(b), size)
	}
	return nil
}

func (m *mesh) connType(a *agent, peerIP string) string {
	for _, p := range m.status(a).Peers.Details {
		if p.NetbirdIP == peerIP {
			return p.ConnectionType
		}
	}
	return "absent"
}

// TestMesh: two home-router sites connect P2P, a symmetric-NAT site
// connects through TURN, traffic flows both ways between every pair, a
// fourth peer is reachable within 3 s, a removed peer becomes unreachable,
// and down removes the interface.
func TestMesh(t *testing.T) {
	m := newMesh(t)
	a, b, c := m.agent("a", netlab.Home), m.agent("b", netlab.Home), m.agent("c", netlab.Symmetric)
	agents := []*agent{a, b, c}
	for _, x := range agents {
		m.up(x)
	}
	ips := map[*agent]string{}
	for _, x := range agents {
		ips[x] = ipOf(m.status(x))
	}
	type pair struct{ x, y *agent }
	var pairs []pair
	for i, x := range agents {
		for _, y := range agents[i+1:] {
			pairs = append(pairs, pair{x, y}, pair{y, x})
		}
	}
	for _, p := range pairs {
		if d, ok := m.waitPing(p.x, ips[p.y], 20*time.Second); !ok {
			t.Fatalf("%s cannot ping %s (%s) after %v\nstatus of %s: %+v", p.x.name, p.y.name, ips[p.y], d, p.x.name, m.status(p.x))
		} else {
			t.Logf("%s -> %s: first ping after %v", p.x.name, p.y.name, d.Round(time.Millisecond))
		}
	}
	for _, p := range pairs {
		if err := m.tcpTransfer(p.x, p.y, ips[p.y], 1<<20); err != nil {
			t.Fatalf("TCP %s -> %s: %v", p.x.name, p.y.name, err)
		}
	}
	want := map[[2]*agent]string{{a, b}: "P2P", {b, a}: "P2P", {a, c}: "Relayed", {c, a}: "Relayed", {b, c}: "Relayed", {c, b}: "Relayed"}
	for k, w := range want {
		if got := m.connType(k[0], ips[k[1]]); got != w {
			t.Errorf("%s sees %s as %s, want %s", k[0].name, k[1].name, got, w)
		}
	}

	// A fourth peer joins and is reachable from every other within 3 s.
	d := m.agent("d", netlab.Home)
	joined := m.up(d)
	ips[d] = ipOf(m.status(d))
	var wg sync.WaitGroup
	for _, x := range agents {
		wg.Add(1)
		go func(x *agent) {
			defer wg.Done()
			if _, ok := m.waitPing(x, ips[d], 3*time.Second-time.Since(joined)); !ok {
				t.Errorf("%s cannot reach the new peer d within 3 s of up", x.name)
			}
		}(x)
	}
	wg.Wait()
	t.Logf("fourth peer reachable from all after %v", time.Since(joined).Round(time.Millisecond))

	// Removing d (on the server) makes it unreachable.
	out, _ := proctest.Run(t, "netbird-server", "admin", "--datadir", m.dataDir, "peers", "list")
	var dID string
	pub := m.status(d).PublicKey
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, pub) {
			dID = strings.Fields(line)[0]
		}
	}
	if out, err := proctest.Run(t, "netbird-server", "admin", "--datadir", m.dataDir, "peers", "delete", dID); err != nil {
		t.Fatalf("delete d: %v %s", err, out)
	}
	deadline := time.Now().Add(5 * time.Second)
	for m.ping(a, ips[d]) {
		if time.Now().After(deadline) {
			t.Fatal("removed peer still reachable after 5 s")
		}
		time.Sleep(200 * time.Millisecond)
	}

	// down removes the interface.
	if out, err := m.cli(a, "down"); err != nil {
		t.Fatalf("down: %v %s", err, out)
	}
	if out, err := m.lab.Exec(a.ns, "ip", "link", "show", a.iface); err == nil {
		t.Fatalf("interface %s still present after down:\n%s", a.iface, out)
	}
}
