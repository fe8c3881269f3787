package routes

import (
	"net/netip"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
)

func testKey(t testing.TB, b byte) key.Public {
	t.Helper()
	var k key.Public
	k[0] = b
	return k
}

// step is one moment of a failover scenario: the peers' connections at
// that time and the peer the group must use.
type step struct {
	at    time.Duration
	conns map[byte]PeerConn // peers absent here are not in the map
	want  byte              // 0: no choice
}

var (
	up      = PeerConn{Connected: true}
	relayed = PeerConn{Connected: true, Relayed: true}
	down    = PeerConn{}
	left    = PeerConn{Left: true}
)

func TestChooser(t *testing.T) {
	// Peer 1 metric 10, peer 2 metric 10, peer 3 metric 100.
	routesOf := func(t *testing.T) Group {
		var g Group
		for _, p := range []struct {
			b      byte
			metric int
		}{{1, 10}, {2, 10}, {3, 100}} {
			g.Routes = append(g.Routes, Route{ID: string(rune('a' + p.b)), NetID: "office", Prefix: netip.MustParsePrefix("10.1.0.0/16"), Peer: testKey(t, p.b), Metric: p.metric})
		}
		g.ID, g.NetID = g.Routes[0].HA(), "office"
		return g
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"lowest metric wins, then a direct path over a relayed one", []step{
			{0, map[byte]PeerConn{1: relayed, 2: up, 3: up}, 2},
		}},
		{"a lower metric beats a better connection", []step{
			{0, map[byte]PeerConn{1: relayed, 3: up}, 1},
		}},
		{"a better peer appearing never moves the route (no flapping)", []step{
			{0, map[byte]PeerConn{1: relayed, 3: up}, 1}, // 2 not in the map yet
			{time.Second, map[byte]PeerConn{1: relayed, 2: up, 3: up}, 1},
			{time.Minute, map[byte]PeerConn{1: relayed, 2: up, 3: up}, 1},
		}},
		{"failover within the grace when the chosen peer disconnects", []step{
			{0, map[byte]PeerConn{1: up, 2: up, 3: up}, 1},
			{10 * time.Second, map[byte]PeerConn{1: down, 2: up, 3: up}, 1}, // lost: grace starts
			{10*time.Second + FailoverGrace - time.Millisecond, map[byte]PeerConn{1: down, 2: up, 3: up}, 1},
			{10*time.Second + FailoverGrace, map[byte]PeerConn{1: down, 2: up, 3: up}, 2}, // < 5 s after the break
			{20 * time.Second, map[byte]PeerConn{1: up, 2: up, 3: up}, 2},                 // 1 back: no move back
		}},
		{"a blip shorter than the grace does not move the route", []step{
			{0, map[byte]PeerConn{1: up, 2: up}, 1},
			{time.Second, map[byte]PeerConn{1: down, 2: up}, 1},
			{time.Second + FailoverGrace/2, map[byte]PeerConn{1: up, 2: up}, 1},
			{time.Second + FailoverGrace, map[byte]PeerConn{1: down, 2: up}, 1}, // a new loss: grace restarts
			{time.Second + 2*FailoverGrace, map[byte]PeerConn{1: down, 2: up}, 2},
		}},
		{"a chosen peer known to be gone moves the route without the grace", []step{
			{0, map[byte]PeerConn{1: up, 2: relayed, 3: up}, 1},
			{10 * time.Second, map[byte]PeerConn{1: left, 2: relayed, 3: up}, 2},
			{time.Minute, map[byte]PeerConn{1: up, 2: relayed, 3: up}, 2}, // 1 back: no move back
		}},
		{"a gone peer with nobody to take over stays chosen", []step{
			{0, map[byte]PeerConn{1: up, 2: down}, 1},
			{time.Second, map[byte]PeerConn{1: left, 2: down}, 1},
			{time.Second + time.Millisecond, map[byte]PeerConn{1: left, 2: up}, 2},
		}},
		{"the chosen peer leaving the map moves the route at once", []step{
			{0, map[byte]PeerConn{1: up, 2: relayed, 3: up}, 1},
			{time.Second, map[byte]PeerConn{2: relayed, 3: up}, 2},
		}},
		{"nobody connected: the lowest metric, kept until another connects past the grace", []step{
			{0, map[byte]PeerConn{1: down, 2: down, 3: down}, 1},
			{FailoverGrace / 2, map[byte]PeerConn{1: down, 2: down, 3: up}, 1}, // 1 may still come up
			{FailoverGrace * 3 / 4, map[byte]PeerConn{1: up, 2: down, 3: up}, 1},
			{time.Minute, map[byte]PeerConn{1: up, 2: down, 3: up}, 1},
		}},
		{"nobody connected: one that connects takes over after the grace", []step{
			{0, map[byte]PeerConn{1: down, 2: down, 3: down}, 1},
			{FailoverGrace, map[byte]PeerConn{1: down, 2: down, 3: up}, 3},
		}},
		{"every peer down: keep the chosen one", []step{
			{0, map[byte]PeerConn{1: up, 2: up}, 1},
			{time.Minute, map[byte]PeerConn{1: down, 2: down}, 1},
		}},
		{"no peer in the map: no choice", []step{
			{0, map[byte]PeerConn{1: up}, 1},
			{time.Second, map[byte]PeerConn{}, 0},
			{2 * time.Second, map[byte]PeerConn{2: relayed}, 2},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := routesOf(t)
			c := NewChooser(0)
			t0 := time.Unix(1_700_000_000, 0)
			for i, s := range tc.steps {
				conn := func(k key.Public) (PeerConn, bool) {
					pc, ok := s.conns[k[0]]
					return pc, ok
				}
				got := c.Choose(t0.Add(s.at), []Group{g}, conn)
				r, ok := got[g.ID]
				gotPeer := byte(0)
				if ok {
					gotPeer = r.Peer[0]
				}
				if gotPeer != s.want {
					t.Fatalf("step %d (at %v): chose peer %d, want %d", i, s.at, gotPeer, s.want)
				}
			}
		})
	}
}

func TestChooserForgetsGroups(t *testing.T) {
	c := NewChooser(0)
	k := testKey(t, 1)
	g := Group{ID: "n|10.0.0.0/8", NetID: "n", Routes: []Route{{ID: "r", NetID: "n", Prefix: netip.MustParsePrefix("10.0.0.0/8"), Peer: k}}}
	conn := func(key.Public) (PeerConn, bool) { return up, true }
	c.Choose(time.Now(), []Group{g}, conn)
	c.Choose(time.Now(), nil, conn)
	if len(c.groups) != 0 {
		t.Errorf("chooser keeps %d groups after they left", len(c.groups))
	}
}

func TestClientRoutes(t *testing.T) {
	own, other, third := testKey(t, 1), testKey(t, 2), testKey(t, 3)
	p := netip.MustParsePrefix("10.1.0.0/16")
	all := []Route{
		{ID: "a", NetID: "office", Prefix: p, Peer: own},
		{ID: "b", NetID: "office", Prefix: p, Peer: other},                   // same HA group as ours: dropped
		{ID: "c", NetID: "lab", Prefix: p, Peer: other},                      // another NetID: kept
		{ID: "d", NetID: "web", Domains: []string{"a.example"}, Peer: third}, // kept
	}
	got := ClientRoutes(all, own)
	var ids []string
	for _, r := range got {
		ids = append(ids, r.ID)
	}
	if len(ids) != 2 || ids[0] != "c" || ids[1] != "d" {
		t.Errorf("client routes = %v, want [c d]", ids)
	}
}
