package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
	"github.com/wiremesh/wiremesh/internal/pgtest"
)

// TestPostgresRestart runs the server on Postgres and restarts the database
// under it: established tunnels keep passing traffic throughout, management
// reconnects on its own (a new peer registers and reaches the others), and
// the peers registered before the restart are all still there.
func TestPostgresRestart(t *testing.T) {
	pg := pgtest.Start(t)
	m := NewMeshOn(t, []string{"--store", "postgres", "--store-dsn", pg.DSN("postgres")})
	a, b := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home)
	m.Up(a)
	m.Up(b)
	ipA, ipB := IPOf(m.Status(a)), IPOf(m.Status(b))
	if _, ok := m.WaitPing(a, ipB, 20*time.Second); !ok {
		t.Fatal("a cannot reach b")
	}

	lost := make(chan string, 1)
	go func() {
		// A count, not a deadline: a deadline cuts off the last reply.
		out, _ := m.Lab.Exec(a.NS, "ping", "-i", "0.05", "-c", "160", "-w", "20", "-W", "1", ipB)
		lost <- out
	}()
	time.Sleep(time.Second)
	pg.Stop(t)
	time.Sleep(3 * time.Second)
	pg.StartAgain(t)
	if out := <-lost; !strings.Contains(out, " 0% packet loss") {
		t.Fatalf("pings a -> b were lost while Postgres restarted:\n%s", out)
	}

	// Management uses the database again without being restarted.
	c := m.Agent("c", netlab.Home)
	start := m.Up(c)
	t.Logf("a new peer registered in %v after Postgres came back", time.Since(start).Round(time.Millisecond))
	if _, ok := m.WaitPing(c, ipA, 10*time.Second); !ok {
		t.Fatal("a peer registered after the restart cannot reach a")
	}
	if _, ok := m.WaitPing(b, IPOf(m.Status(c)), 10*time.Second); !ok {
		t.Fatal("b did not learn of the peer registered after the restart")
	}
	out, err := m.Admin("peers", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ps []struct{ Name, IP string }
	if err := json.Unmarshal([]byte(out), &ps); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range ps {
		got[p.Name] = p.IP
	}
	if len(ps) != 3 || got["a"] != ipA || got["b"] != ipB {
		t.Fatalf("peers after the restart: %+v (a %s, b %s)", ps, ipA, ipB)
	}
}
