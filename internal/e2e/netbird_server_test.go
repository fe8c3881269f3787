package e2e

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/proctest"
)

// The account and reusable setup key of NetBird's own test store
// (management/server/testdata/store.sql in its source).
const netbirdTestKey = "A2C8E62B-38F5-4553-B31E-DD66C696CEBB"

// TestJoinNetBirdServer: our agents join NetBird's own server (its
// combined management, signal, relay and STUN, built from its released
// source by scripts/netbird-official.sh) with a setup key, and reach each
// other through tunnels it coordinates: one pair behind home routers, one
// peer behind a symmetric NAT that only NetBird's relay connects.
func TestJoinNetBirdServer(t *testing.T) {
	bin, src := os.Getenv("NB_OFFICIAL_SERVER"), os.Getenv("NB_OFFICIAL_SRC")
	if bin == "" || src == "" {
		t.Skip("NB_OFFICIAL_SERVER / NB_OFFICIAL_SRC not set (bash scripts/netbird-official.sh builds NetBird's server)")
	}
	m := &Mesh{t: t, Lab: netlab.New(t), DataDir: t.TempDir()}
	dir := m.DataDir
	seedStore(t, filepath.Join(src, "management/server/testdata/store.sql"), filepath.Join(dir, "store.db"))
	// Its geolocation databases (shipped with its tests): the server will
	// not start without them and cannot download them here.
	for _, f := range []string{"GeoLite2-City_20240305.mmdb", "geonames_20240305.db"} {
		b, err := os.ReadFile(filepath.Join(src, "management/server/testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	const port = 33080
	url := fmt.Sprintf("http://%s:%d", netlab.PubAddr, port)
	cfg := fmt.Sprintf(`server:
  listenAddress: "%s:%d"
  exposedAddress: "%s"
  stunPorts: [3478]
  metricsPort: 9090
  healthcheckAddress: "127.0.0.1:9000"
  logLevel: "debug"
  logFile: "console"
  authSecret: "interop-relay-secret"
  dataDir: "%s"
  disableAnonymousMetrics: true
  disableGeoliteUpdate: true
  auth:
    issuer: "%s/oauth2"
    cliRedirectURIs: ["http://localhost:53000/"]
  store:
    engine: "sqlite"
    encryptionKey: "%s"
`, netlab.PubAddr, port, url, dir, url, "X4p7yb1ZUFn/Ql4uvljxYQgqk8ZyhRDvKDl0ss5MBJc=")
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	srv := proctest.StartCmd(t, m.Lab.Cmd(m.Lab.NS("pub"), bin, "--config", cfgPath), nil)
	deadline := time.Now().Add(60 * time.Second)
	for {
		if out, err := m.Lab.Exec(m.Lab.NS("pub"), "bash", "-c", fmt.Sprintf("exec 3<>/dev/tcp/%s/%d", netlab.PubAddr, port)); err == nil {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("NetBird's server does not listen: %s\n%s", out, tail(srv.Output()))
		}
		select {
		case <-srv.Exited():
			t.Fatalf("NetBird's server exited:\n%s", tail(srv.Output()))
		case <-time.After(200 * time.Millisecond):
		}
	}
	agents := []*Agent{m.Agent("a", netlab.Home), m.Agent("b", netlab.Home), m.Agent("c", netlab.Symmetric)}
	ips := map[string]string{}
	for _, a := range agents {
		if out, err := m.UpAt(a, url, netbirdTestKey); err != nil || !strings.Contains(out, "Connected") {
			t.Fatalf("%s: up against NetBird's server: %v\n%s\nserver:\n%s", a.Name, err, out, tail(srv.Output()))
		}
		ips[a.Name] = IPOf(m.Status(a))
	}
	for _, from := range agents {
		for _, to := range agents {
			if from == to {
				continue
			}
			d, ok := m.WaitPing(from, ips[to.Name], 30*time.Second)
			if !ok {
				t.Fatalf("%s cannot reach %s through NetBird's server\n%s", from.Name, to.Name, tail(from.Daemon.Output()))
			}
			t.Logf("%s -> %s: first reply %v, %s", from.Name, to.Name, d.Round(time.Millisecond), m.ConnType(from, ips[to.Name]))
		}
	}
	deadline = time.Now().Add(30 * time.Second)
	for m.ConnType(agents[0], ips["b"]) != "P2P" {
		if time.Now().After(deadline) {
			t.Fatalf("a <-> b behind home routers stayed %s", m.ConnType(agents[0], ips["b"]))
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := m.TCPTransfer(agents[0], agents[1], ips["b"], 1<<20); err != nil {
		t.Errorf("TCP a -> b: %v", err)
	}
	if !regexp.MustCompile(`(?i)relay`).MatchString(m.ConnType(agents[2], ips["a"])) {
		t.Errorf("c behind the symmetric NAT: %s, want relayed", m.ConnType(agents[2], ips["a"]))
	}
}

// seedStore creates NetBird's SQLite store from one of its test dumps.
func seedStore(t *testing.T, dump, db string) {
	t.Helper()
	b, err := os.ReadFile(dump)
	if err != nil {
		t.Fatal(err)
	}
	d, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.Exec(string(b)); err != nil {
		t.Fatalf("load %s: %v", dump, err)
	}
}
