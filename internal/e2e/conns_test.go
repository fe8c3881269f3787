package e2e

import (
	"fmt"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// TestPeerConnectionsREST: the peers page's P2P/relayed view end to end.
// Two home-router sites connect P2P, a symmetric-NAT site through the
// relay; each agent reports its connections and GET /api/peers shows
// the right counts within seconds of the connections settling, and
// GET /api/peers/{id} each connection's type.
func TestPeerConnectionsREST(t *testing.T) {
	m := NewMesh(t)
	admin := m.adminOf(t)
	a, b, c := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home), m.Agent("c", netlab.Symmetric)
	agents := []*Agent{a, b, c}
	for _, x := range agents {
		m.Up(x)
	}
	ips := map[*Agent]string{}
	for _, x := range agents {
		ips[x] = IPOf(m.Status(x))
	}
	// The connections as the agents see them settle first (every pair is
	// relayed at first; cone pairs upgrade to P2P).
	want := map[[2]*Agent]string{{a, b}: "P2P", {b, a}: "P2P", {a, c}: "Relayed", {c, a}: "Relayed", {b, c}: "Relayed", {c, b}: "Relayed"}
	for k, w := range want {
		if _, ok := m.WaitPing(k[0], ips[k[1]], 20*time.Second); !ok {
			t.Fatalf("%s cannot ping %s", k[0].Name, k[1].Name)
		}
		deadline := time.Now().Add(15 * time.Second)
		for m.ConnType(k[0], ips[k[1]]) != w {
			if time.Now().After(deadline) {
				t.Fatalf("%s sees %s as %s, want %s", k[0].Name, k[1].Name, m.ConnType(k[0], ips[k[1]]), w)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	settled := time.Now()

	wantCounts := map[string]string{"a": "1 p2p 1 relayed 0 connecting", "b": "1 p2p 1 relayed 0 connecting", "c": "0 p2p 2 relayed 0 connecting"}
	counts := func() map[string]string {
		out := map[string]string{}
		for _, p := range getList(t, admin, "/api/peers") {
			c, _ := p["connections"].(map[string]any)
			if c == nil {
				out[p["name"].(string)] = "none"
				continue
			}
			out[p["name"].(string)] = fmt.Sprintf("%v p2p %v relayed %v connecting", c["p2p"], c["relayed"], c["connecting"])
		}
		return out
	}
	for {
		got := counts()
		ok := len(got) == len(wantCounts)
		for k, v := range wantCounts {
			ok = ok && got[k] == v
		}
		if ok {
			break
		}
		if time.Since(settled) > 5*time.Second {
			t.Fatalf("GET /api/peers connections = %v, want %v (5 s after the connections settled)", got, wantCounts)
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Logf("the REST peer list showed the connections %v after they settled", time.Since(settled).Round(time.Millisecond))

	// One peer in detail: each connection by peer ID.
	ids := map[string]string{}
	for _, x := range agents {
		ids[x.Name] = idOf(t, admin, "/api/peers", x.Name)
	}
	one := admin.call("GET", "/api/peers/"+ids["c"], nil, 200)
	list, _ := one["peer_connections"].([]any)
	types := map[string]any{}
	for _, e := range list {
		e := e.(map[string]any)
		types[e["peer_id"].(string)] = e["type"]
	}
	if len(types) != 2 || types[ids["a"]] != "relayed" || types[ids["b"]] != "relayed" {
		t.Fatalf("GET /api/peers/{c} peer_connections = %v, want a and b relayed", one["peer_connections"])
	}

	// c goes down: its report goes with its Sync stream, and the others
	// report their connection to it gone.
	if out, err := m.CLI(c, "down"); err != nil {
		t.Fatalf("down: %v %s", err, out)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		got := counts()
		if got["c"] == "none" && got["a"] != wantCounts["a"] {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after c went down GET /api/peers connections = %v: want none for c and a's changed", got)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
