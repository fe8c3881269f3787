package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// officialClient is the official NetBird client's binary from
// NB_OFFICIAL_CLIENT; without it the test is skipped.
func officialClient(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("NB_OFFICIAL_CLIENT")
	if bin == "" {
		t.Skip("NB_OFFICIAL_CLIENT not set (eval \"$(bash scripts/netbird-official.sh)\" builds it)")
	}
	return bin
}

// TestOfficialClient: the official NetBird client (built from NetBird's
// released source by scripts/netbird-official.sh; the path in
// NB_OFFICIAL_CLIENT) joins our server with a setup key beside our agent
// and two official clients: all reach each other through the tunnel, by
// address and by the peer names our server hands out, and the official
// client reports its peers connected.
func TestOfficialClient(t *testing.T) {
	bin := officialClient(t)
	m := NewMesh(t)
	ours := m.Agent("a", netlab.Home)
	o1 := m.AgentOf(bin, "o", netlab.Home)
	o2 := m.AgentOf(bin, "p", netlab.Symmetric)
	m.Up(ours)
	for _, o := range []*Agent{o1, o2} {
		out, err := m.CLI(o, "up", "-m", "http://"+netlab.PubAddr+":"+mgmtPort, "-k", m.Key, "-n", o.Name, "--interface-name", o.Iface)
		if err != nil {
			t.Fatalf("official up: %v\n%s\n%s", err, out, o.Daemon.Output())
		}
	}
	ipA := IPOf(m.Status(ours))
	ips := map[string]string{"a": ipA}
	for _, o := range []*Agent{o1, o2} {
		ips[o.Name] = IPOf(m.Status(o))
		if ips[o.Name] == "" {
			t.Fatalf("%s: no address in status:\n%s", o.Name, o.Daemon.Output())
		}
	}
	agents := []*Agent{ours, o1, o2}
	for _, from := range agents {
		for _, to := range agents {
			if from == to {
				continue
			}
			if d, ok := m.WaitPing(from, ips[to.Name], 30*time.Second); !ok {
				t.Fatalf("%s cannot reach %s (%s)\n%s:\n%s\n%s:\n%s", from.Name, to.Name, ips[to.Name], from.Name, tail(from.Daemon.Output()), to.Name, tail(to.Daemon.Output()))
			} else {
				t.Logf("%s -> %s: first reply %v", from.Name, to.Name, d.Round(time.Millisecond))
			}
		}
	}
	if err := m.TCPTransfer(o1, ours, ipA, 1<<20); err != nil {
		t.Errorf("TCP official -> ours: %v", err)
	}
	// o and our agent are behind home routers: the pair goes direct.
	p2pWait := time.Now()
	deadline := p2pWait.Add(30 * time.Second)
	for {
		if m.ConnType(o1, ipA) == "P2P" && m.ConnType(ours, ips["o"]) == "P2P" {
			t.Logf("official o <-> our a: P2P after another %v", time.Since(p2pWait).Round(time.Millisecond))
			break
		}
		if time.Now().After(deadline) {
			// An official client that ICE connects through one of our TURN
			// candidates stays on TURN for good; our agent must not offer
			// them to it (signalpb.Body.WiremeshTurnPunch).
			t.Errorf("official o <-> our a still %s / %s after 30 s, want P2P\no (official), ICE lines:\n%s\na (ours), ICE lines:\n%s",
				m.ConnType(o1, ipA), m.ConnType(ours, ips["o"]), iceLines(o1.Daemon.Output()), iceLines(ours.Daemon.Output()))
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, o := range []*Agent{o1, o2} {
		st := m.Status(o)
		if st.Peers.Connected != 2 {
			t.Errorf("%s (official) reports %d of %d peers connected", o.Name, st.Peers.Connected, st.Peers.Total)
		}
		for _, p := range st.Peers.Details {
			t.Logf("%s (official) -> %s: %s %s/%s", o.Name, p.NetbirdIP, p.ConnectionType, p.IceCandidateType.Local, p.IceCandidateType.Remote)
		}
	}
	// Peer names from our server's DNS zone, resolved by the official
	// client's own resolver.
	if out, err := m.Lab.Exec(o1.NS, "ping", "-c", "3", "-i", "0.5", "-W", "2", "a.netbird.selfhosted"); err != nil {
		t.Errorf("official client: ping a.netbird.selfhosted: %v\n%s", err, out)
	}
	for _, o := range []*Agent{o1, o2} {
		if out, err := m.CLI(o, "down"); err != nil {
			t.Errorf("official down: %v\n%s", err, out)
		}
	}
}

// iceLines keeps the lines of a daemon's log that tell why a pair did or
// did not go direct, so a failure names its cause.
func iceLines(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		low := strings.ToLower(l)
		if strings.Contains(low, "ice") || strings.Contains(low, "candidate") || strings.Contains(low, "offer") ||
			strings.Contains(low, "answer") || strings.Contains(low, "signal") || strings.Contains(low, "p2p") {
			keep = append(keep, l)
		}
	}
	return tail(strings.Join(keep, "\n"))
}

func tail(s string) string {
	if len(s) > 6000 {
		return s[len(s)-6000:]
	}
	return strings.TrimSpace(s)
}
