package e2e

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// relayOf is the relay address `netbird status --json` shows for a peer.
func (m *Mesh) relayOf(a *Agent, peerIP string) string {
	out, err := m.CLI(a, "status", "--json")
	if err != nil {
		return ""
	}
	var st struct {
		Peers struct {
			Details []struct {
				IP           string `json:"netbirdIp"`
				RelayAddress string `json:"relayAddress"`
			} `json:"details"`
		} `json:"peers"`
	}
	_ = json.Unmarshal([]byte(out), &st)
	for _, p := range st.Peers.Details {
		if p.IP == peerIP {
			return p.RelayAddress
		}
	}
	return ""
}

// TestRelayFirst: a peer behind the symmetric NAT reaches the others
// through the embedded relay within 1 s of `netbird up`, the relay is
// what carries it (not TURN), and the cone pair upgrades to P2P.
func TestRelayFirst(t *testing.T) {
	m := NewMesh(t)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	c := m.Agent("c", netlab.Symmetric)
	start := m.Up(c)
	ipC := IPOf(m.Status(c))
	for _, ip := range []string{ipA, ipB} {
		if _, ok := m.WaitPing(c, ip, 5*time.Second); !ok {
			t.Fatalf("c cannot reach %s", ip)
		}
		if d := time.Since(start); d > time.Second {
			t.Errorf("c reached %s %v after up, want under 1 s", ip, d.Round(time.Millisecond))
		} else {
			t.Logf("c reached %s %v after up", ip, d.Round(time.Millisecond))
		}
	}
	if r := m.relayOf(c, ipA); !strings.HasPrefix(r, "rel://") {
		t.Errorf("c -> a is not carried by the relay (relay address %q, type %s)", r, m.ConnType(c, ipA))
	}
	if _, ok := m.WaitPing(a, ipC, 5*time.Second); !ok {
		t.Fatal("a cannot reach c")
	}
	if err := m.TCPTransfer(a, c, ipC, 4<<20); err != nil {
		t.Fatalf("TCP a -> c through the relay: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for m.ConnType(a, ipB) != "P2P" || m.ConnType(b, ipA) != "P2P" {
		if time.Now().After(deadline) {
			t.Fatalf("the cone pair did not upgrade to P2P: a sees b %s, b sees a %s", m.ConnType(a, ipB), m.ConnType(b, ipA))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if r := m.relayOf(a, ipB); r != "" {
		t.Errorf("P2P pair still reports relay %q", r)
	}

	// A debug bundle of c holds its status and its profile without secrets.
	bundle := filepath.Join(t.TempDir(), "bundle.tar.gz")
	if out, err := m.CLI(c, "debug", "bundle", "-o", bundle); err != nil {
		t.Fatalf("debug bundle: %v\n%s", err, out)
	}
	files := readTarGz(t, bundle)
	if !strings.Contains(files["status.json"], ipA) || !strings.Contains(files["config.json"], "(redacted)") {
		t.Fatalf("bundle: status %q, config %q", files["status.json"], files["config.json"])
	}
	cfg, _ := os.ReadFile(filepath.Join(c.Dir, "config.json"))
	var keyed struct {
		PrivateKey string `json:"private_key"`
	}
	_ = json.Unmarshal(cfg, &keyed)
	for name, body := range files {
		if keyed.PrivateKey != "" && strings.Contains(body, keyed.PrivateKey) {
			t.Fatalf("%s in the bundle holds the private key", name)
		}
		if strings.Contains(body, m.Key) {
			t.Fatalf("%s in the bundle holds the setup key", name)
		}
	}
}

func readTarGz(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	out := map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		out[h.Name] = string(b)
	}
}

// TestRelayFallback: when the direct path of a P2P pair breaks, traffic
// moves to the relay within seconds without user action, and the pair
// returns to P2P once the direct path works again.
func TestRelayFallback(t *testing.T) {
	m := NewMesh(t)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	deadline := time.Now().Add(15 * time.Second)
	for m.ConnType(a, ipB) != "P2P" || m.ConnType(b, ipA) != "P2P" {
		if time.Now().After(deadline) {
			t.Fatal("the pair never went P2P")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Block UDP between the two routers' WAN addresses (site a is
	// 10.200.0.11, site b 10.200.0.12); the relay runs over TCP to the server.
	rule := func(op string) {
		for _, dir := range []string{"-d", "-s"} {
			if out, err := m.Lab.Exec(m.Lab.NS("ar"), "iptables", op, "FORWARD", "-p", "udp", dir, "10.200.0.12", "-j", "DROP"); err != nil {
				t.Fatalf("iptables %s: %v %s", op, err, out)
			}
		}
	}
	rule("-I")
	cut := time.Now()
	time.Sleep(300 * time.Millisecond)
	if _, ok := m.WaitPing(a, ipB, 15*time.Second); !ok {
		t.Fatalf("no traffic 15 s after the direct path broke: a sees b as %s", m.ConnType(a, ipB))
	}
	t.Logf("traffic flows again %v after the direct path broke (%s, relay %s)", time.Since(cut).Round(time.Millisecond), m.ConnType(a, ipB), m.relayOf(a, ipB))
	if r := m.relayOf(a, ipB); !strings.HasPrefix(r, "rel://") {
		t.Errorf("after the break a -> b is not on the relay (%q, %s)", r, m.ConnType(a, ipB))
	}
	for range 20 {
		if !m.Ping(a, ipB) {
			t.Fatal("the relayed path dropped pings")
		}
	}
	rule("-D")
	healed := time.Now()
	deadline = time.Now().Add(60 * time.Second)
	for m.ConnType(a, ipB) != "P2P" || m.ConnType(b, ipA) != "P2P" {
		if time.Now().After(deadline) {
			t.Fatalf("not back to P2P 60 s after the direct path returned: a sees b %s, b sees a %s", m.ConnType(a, ipB), m.ConnType(b, ipA))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("back to P2P %v after the direct path returned", time.Since(healed).Round(time.Millisecond))
	if !m.Ping(a, ipB) {
		t.Fatal("no traffic after returning to P2P")
	}
}

// TestRelayedWhileICEFails: with no UDP at all out of site a, ICE fails
// and restarts again and again while the relay (over TCP) carries the
// traffic; both sides keep reporting the peer connected through the relay,
// never "Connecting", across the restarts.
func TestRelayedWhileICEFails(t *testing.T) {
	m := NewMesh(t)
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 15*time.Second); !ok {
		t.Fatal("a cannot reach b")
	}
	if out, err := m.Lab.Exec(m.Lab.NS("ar"), "iptables", "-I", "FORWARD", "-p", "udp", "-j", "DROP"); err != nil {
		t.Fatalf("iptables: %v %s", err, out)
	}
	cut := time.Now()
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatalf("no traffic 20 s after UDP was cut: a sees b as %s", m.ConnType(a, ipB))
	}
	deadline := time.Now().Add(15 * time.Second)
	for m.ConnType(a, ipB) != "Relayed" || m.ConnType(b, ipA) != "Relayed" {
		if time.Now().After(deadline) {
			t.Fatalf("a sees b as %s, b sees a as %s, want Relayed", m.ConnType(a, ipB), m.ConnType(b, ipA))
		}
		time.Sleep(100 * time.Millisecond)
	}
	// ICE fails 8 s after its last check and restarts 1, 2, 4 s later:
	// 25 s covers several restarts.
	for steady := time.Now().Add(25 * time.Second); time.Now().Before(steady); time.Sleep(250 * time.Millisecond) {
		if x, y := m.ConnType(a, ipB), m.ConnType(b, ipA); x != "Relayed" || y != "Relayed" {
			t.Fatalf("%v after UDP was cut: a sees b as %s, b sees a as %s, want Relayed throughout\na:\n%s", time.Since(cut).Round(time.Millisecond), x, y, iceLines(a.Daemon.Output()))
		}
	}
	if !m.Ping(a, ipB) {
		t.Fatal("the relayed path dropped a ping")
	}
}
