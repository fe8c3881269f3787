package e2e

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testacme"
)

// TestACMEJoin: netbird-server --domain gets its certificate from a real
// ACME CA (pebble, beside the server on the public segment, resolving the
// name to it) and serves everything on 443; two agents join with
// `netbird up --management-url https://NAME` (the name from their hosts
// file, the CA's root trusted through SSL_CERT_FILE), one behind a
// symmetric NAT so that their traffic goes through the relay at
// rels://NAME:443, and ping each other.
func TestACMEJoin(t *testing.T) {
	const name = "vpn.wiremesh.test"
	lab := netlab.New(t)
	pub := lab.NS("pub")
	ca := testacme.Start(t, testacme.Options{HTTPPort: 80, TLSPort: 443, Answer: netlab.PubAddr,
		Cmd: func(args ...string) *exec.Cmd { return lab.Cmd(pub, args...) },
		Dial: func(ctx context.Context, network, addr string) (c net.Conn, err error) {
			err = netlab.Do(pub, func() error { c, err = (&net.Dialer{}).DialContext(ctx, network, addr); return err })
			return c, err
		}})
	roots := filepath.Join(t.TempDir(), "acme-roots.pem")
	if err := os.WriteFile(roots, ca.RootsPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	m := &Mesh{t: t, Lab: lab, DataDir: t.TempDir(), AgentEnv: []string{"SSL_CERT_FILE=" + roots}}
	m.Server = proctest.StartCmd(t, lab.Cmd(pub, proctest.Binary(t, "netbird-server"), "--datadir", m.DataDir, "--domain", name,
		"--listen", netlab.PubAddr+":443", "--acme-http-listen", netlab.PubAddr+":80", "--acme-directory", ca.Directory, "--acme-ca-file", ca.CAFile,
		"--stun-port", "3478", "--turn-relay-ip", netlab.PubAddr), nil)
	m.Server.Wait(t, regexp.MustCompile(`TLS certificate ready`), 60*time.Second)
	out, err := m.Admin("setup-keys", "create", "--reusable")
	if err != nil {
		t.Fatalf("create key: %v\n%s", err, out)
	}
	key := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])

	var agents []*Agent
	for _, site := range []struct {
		name string
		nat  netlab.NAT
	}{{"a", netlab.Home}, {"b", netlab.Symmetric}} {
		// The name resolves through the agent namespace's own hosts file
		// (netlab keeps one a test wrote before the namespace exists).
		dir := filepath.Join("/etc/netns", lab.NS(site.name))
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "hosts"), []byte("127.0.0.1 localhost\n::1 localhost\n"+netlab.PubAddr+" "+name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		a := m.Agent(site.name, site.nat)
		if out, err := m.CLI(a, "up", "-m", "https://"+name, "-k", key, "-n", a.Name, "--interface-name", a.Iface); err != nil || !strings.Contains(out, "Connected") {
			t.Fatalf("%s: netbird up over https: %v\n%s", a.Name, err, out)
		}
		agents = append(agents, a)
	}
	st := m.Status(agents[0])
	if !st.Management.Connected || !st.Signal.Connected {
		t.Fatalf("a's status: %+v", st)
	}
	ipB := IPOf(m.Status(agents[1]))
	if d, ok := m.WaitPing(agents[0], ipB, 30*time.Second); !ok {
		t.Fatalf("a cannot ping b (%s) after %v: %+v", ipB, d, m.Status(agents[0]))
	}
	if got := m.ConnType(agents[0], ipB); got != "Relayed" {
		t.Fatalf("a reaches b %s, want Relayed (through rels://%s:443)", got, name)
	}
}
