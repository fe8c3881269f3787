package e2e

import (
	"encoding/json"
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
}
