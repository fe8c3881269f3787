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
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

const mgmtPort = "33073"

// serverMetricsPort and signalMetricsPort serve the servers' /metrics
// (--metrics-addr), apart from their public ports.
const (
	serverMetricsPort = "9090"
	signalMetricsPort = "9092"
)

// agentMetricsPort serves each agent's /metrics on loopback inside its
// own namespace.
const agentMetricsPort = "9091"

// Agent is one agent process (its daemon) in a site namespace.
type Agent struct {
	Name, NS, Dir, Sock, Iface string
	Daemon                     *proctest.Proc
	// Official is the path of an official NetBird client binary run
	// instead of ours ("" for ours).
	Official string
}

// StatusJSON is the part of status --json the tests read.
type StatusJSON struct {
	NetbirdIP   string `json:"netbirdIp"`
	FQDN        string `json:"fqdn"`
	PublicKey   string `json:"publicKey"`
	ProfileName string `json:"profileName"`
	Peers       struct {
		Total, Connected int
		Details          []struct {
			NetbirdIP        string                         `json:"netbirdIp"`
			Status           string                         `json:"status"`
			ConnectionType   string                         `json:"connectionType"`
			IceCandidateType struct{ Local, Remote string } `json:"iceCandidateType"`
		} `json:"details"`
	} `json:"peers"`
	Management struct {
		URL       string `json:"url"`
		Connected bool   `json:"connected"`
	} `json:"management"`
	Signal struct{ Connected bool } `json:"signal"`
}

// Mesh is a lab with netbird-server on the public segment and a reusable setup key.
type Mesh struct {
	t       *testing.T
	Lab     *netlab.Lab
	DataDir string
	// StoreArgs select the store engine (none: SQLite in DataDir).
	StoreArgs []string
	// ServerArgs are added to the server's command line.
	ServerArgs []string
	Key        string
	Server     *proctest.Proc
	// AgentEnv is added to every agent daemon's environment.
	AgentEnv []string
}

// NewMesh builds the lab and starts the server on the embedded store.
func NewMesh(t *testing.T) *Mesh { return NewMeshOn(t, nil) }

// NewMeshOn builds the lab and starts the server with the given store
// arguments (e.g. --store postgres --store-dsn DSN).
func NewMeshOn(t *testing.T, storeArgs []string) *Mesh {
	lab := netlab.New(t)
	m := &Mesh{t: t, Lab: lab, DataDir: t.TempDir(), StoreArgs: storeArgs}
	m.StartServer()
	out, err := m.Admin("setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("create key: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	m.Key = lines[len(lines)-1]
	return m
}

// Admin runs `netbird-server admin` on the mesh's store.
func (m *Mesh) Admin(args ...string) (string, error) {
	full := append(append([]string{"admin", "--datadir", m.DataDir}, m.StoreArgs...), args...)
	return proctest.Run(m.t, "netbird-server", full...)
}

// StartServer starts netbird-server on the public segment.
func (m *Mesh) StartServer() {
	args := append([]string{proctest.Binary(m.t, "netbird-server"), "--datadir", m.DataDir,
		"--insecure-listen", netlab.PubAddr + ":" + mgmtPort, "--stun-port", "3478", "--public-address", netlab.PubAddr,
		"--metrics-addr", netlab.PubAddr + ":" + serverMetricsPort}, m.StoreArgs...)
	args = append(args, m.ServerArgs...)
	m.Server = proctest.StartCmd(m.t, m.Lab.Cmd(m.Lab.NS("pub"), args...), nil)
	m.Server.Wait(m.t, regexp.MustCompile(`setup-keys create`), 20*time.Second)
}

// Agent adds a site of the given NAT kind with a running daemon.
func (m *Mesh) Agent(name string, kind netlab.NAT) *Agent { return m.AgentOf("", name, kind) }

// AgentOf is Agent running the official client at path official ("": ours).
func (m *Mesh) AgentOf(official, name string, kind netlab.NAT) *Agent {
	t := m.t
	ns, _ := m.Lab.Site(name, kind)
	dir := filepath.Join(t.TempDir(), name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return m.RestartDaemon(&Agent{Name: name, NS: ns, Dir: dir, Sock: "unix://" + filepath.Join(dir, "daemon.sock"), Iface: m.Lab.Prefix + name, Official: official})
}

// RestartDaemon starts (again) the agent's daemon with the same state.
func (m *Mesh) RestartDaemon(a *Agent) *Agent {
	t := m.t
	if a.Official != "" {
		a.Daemon = proctest.StartCmd(t, m.Lab.Cmd(a.NS, a.Official, "service", "run", "--daemon-addr", a.Sock, "--log-level", "debug",
			"--log-file", "console", "--config", filepath.Join(a.Dir, "config.json")),
			append([]string{"NB_STATE_DIR=" + a.Dir}, m.AgentEnv...))
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := m.CLI(a, "status"); err == nil {
				return a
			}
			if time.Now().After(deadline) {
				t.Fatalf("the official client's daemon does not answer:\n%s", a.Daemon.Output())
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	a.Daemon = proctest.StartCmd(t, m.Lab.Cmd(a.NS, proctest.Binary(t, "netbird"), "service", "run", "--daemon-addr", a.Sock, "-l", "debug",
		"--metrics-addr", "127.0.0.1:"+agentMetricsPort),
		append([]string{"NB_STATE_DIR=" + a.Dir}, m.AgentEnv...))
	a.Daemon.Wait(t, regexp.MustCompile(`daemon listening`), 10*time.Second)
	return a
}

// CLI runs the netbird CLI against an agent's daemon.
func (m *Mesh) CLI(a *Agent, args ...string) (string, error) {
	bin := a.Official
	if bin == "" {
		bin = proctest.Binary(m.t, "netbird")
	}
	cmd := m.Lab.Cmd(a.NS, append([]string{bin, "--daemon-addr", a.Sock}, args...)...)
	cmd.Env = append(os.Environ(), "NB_STATE_DIR="+a.Dir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Up runs netbird up and returns when it started.
func (m *Mesh) Up(a *Agent) time.Time {
	start := time.Now()
	out, err := m.CLI(a, "up", "-m", "http://"+netlab.PubAddr+":"+mgmtPort, "-k", m.Key, "-n", a.Name, "--interface-name", a.Iface)
	if err != nil || !strings.Contains(out, "Connected") {
		m.t.Fatalf("%s: netbird up: %v\n%s", a.Name, err, out)
	}
	return start
}

// Status is the agent's status --json.
func (m *Mesh) Status(a *Agent) StatusJSON {
	out, err := m.CLI(a, "status", "--json")
	if err != nil {
		m.t.Fatalf("%s status: %v\n%s", a.Name, err, out)
	}
	var s StatusJSON
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		m.t.Fatalf("%s status json: %v\n%s", a.Name, err, out)
	}
	return s
}

// IPOf is the overlay IP of a status.
func IPOf(s StatusJSON) string { ip, _, _ := strings.Cut(s.NetbirdIP, "/"); return ip }

// Ping sends one echo request.
func (m *Mesh) Ping(from *Agent, ip string) bool {
	_, err := m.Lab.Exec(from.NS, "ping", "-c", "1", "-W", "1", ip)
	return err == nil
}

// WaitPing pings until a reply or the deadline.
func (m *Mesh) WaitPing(from *Agent, ip string, within time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < within {
		if m.Ping(from, ip) {
			return time.Since(start), true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return time.Since(start), false
}

// tcpTransfer sends size random bytes from one namespace to an overlay IP
// listening in another, and checks they arrive intact.
// TCPTransfer checks a TCP transfer through the tunnel.
func (m *Mesh) TCPTransfer(from, to *Agent, toIP string, size int) error {
	var ln net.Listener
	if err := netlab.Do(to.NS, func() error {
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
	if err := netlab.Do(from.NS, func() error {
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

// ConnType is how a sees the peer with peerIP (P2P, Relayed, -).
func (m *Mesh) ConnType(a *Agent, peerIP string) string {
	for _, p := range m.Status(a).Peers.Details {
		if p.NetbirdIP == peerIP {
			return p.ConnectionType
		}
	}
	return "absent"
}

// Server is an extra netbird-server on the public segment (another
// management to switch to).
type Server struct {
	URL, Key, DataDir string
	Proc              *proctest.Proc
	port, stunPort    int
}

// ExtraServer starts another netbird-server on the public segment.
func (m *Mesh) ExtraServer(port, stunPort int) *Server {
	s := &Server{DataDir: m.t.TempDir(), port: port, stunPort: stunPort, URL: fmt.Sprintf("http://%s:%d", netlab.PubAddr, port)}
	m.RestartExtra(s)
	out, err := proctest.Run(m.t, "netbird-server", "admin", "--datadir", s.DataDir, "setup-keys", "create", "--reusable")
	if err != nil {
		m.t.Fatalf("create key: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	s.Key = lines[len(lines)-1]
	return s
}

// RestartExtra (re)starts an extra server on its data directory.
func (m *Mesh) RestartExtra(s *Server) {
	s.Proc = proctest.StartCmd(m.t, m.Lab.Cmd(m.Lab.NS("pub"), proctest.Binary(m.t, "netbird-server"), "--datadir", s.DataDir,
		"--insecure-listen", fmt.Sprintf("%s:%d", netlab.PubAddr, s.port), "--stun-port", fmt.Sprint(s.stunPort), "--public-address", netlab.PubAddr), nil)
	s.Proc.Wait(m.t, regexp.MustCompile(`setup-keys create`), 20*time.Second)
}

// UpAt runs netbird up against another server (extra arguments appended).
func (m *Mesh) UpAt(a *Agent, url, setupKey string, extra ...string) (string, error) {
	args := append([]string{"up", "-m", url, "-n", a.Name, "--interface-name", a.Iface}, extra...)
	if setupKey != "" {
		args = append(args, "-k", setupKey)
	}
	return m.CLI(a, args...)
}
