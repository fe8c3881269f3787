package routes

import (
	"cmp"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
)

// FailoverGrace is how long a chosen routing peer may stay disconnected
// before the routes move to another one. It absorbs a momentary gap (an
// ICE restart that recovers at once) so it does not move the routes; the
// peer connection already waits out short losses before it reports a
// disconnect, so with the engine's evaluation every 250 ms the routes move
// within 1.25 s of the connection being reported lost. A peer known to be
// gone (PeerConn.Left) moves them at once.
const FailoverGrace = time.Second

// PeerConn is what the chooser knows of a routing peer's connection.
type PeerConn struct {
	Connected bool // a path (direct or relayed) carries WireGuard
	Relayed   bool
	// Left: the connection is known to be gone, not just interrupted (the
	// peer said it is going away, or it stopped answering while we sent
	// to it, see Liveness): the routes move without the grace.
	Left bool
}

// ConnFunc reports a peer's connection; ok is false for a peer that is not
// (or no longer) in the network map.
type ConnFunc func(key.Public) (c PeerConn, ok bool)

// haState is one group's choice.
type haState struct {
	chosen key.Public
	// lostAt is when the chosen peer was first seen unusable since it was
	// last usable (zero while usable). A peer chosen before it connected
	// counts from the moment it was chosen.
	lostAt time.Time
}

// Chooser picks one routing peer per HA group. It keeps the peer in use
// while it is usable and moves only when that peer leaves the map, is
// known to be gone (PeerConn.Left) or stays disconnected for
// FailoverGrace: a better peer appearing never moves a route (no
// flapping). It is not safe for concurrent use.
type Chooser struct {
	grace  time.Duration
	groups map[HAID]*haState
}

// NewChooser returns a chooser with the given grace (FailoverGrace when 0).
func NewChooser(grace time.Duration) *Chooser {
	if grace == 0 {
		grace = FailoverGrace
	}
	return &Chooser{grace: grace, groups: map[HAID]*haState{}}
}

// Choose updates the choice of every group at time now and returns the
// chosen route of each group that has one. Groups not passed are
// forgotten.
func (c *Chooser) Choose(now time.Time, groups []Group, conn ConnFunc) map[HAID]Route {
	out := map[HAID]Route{}
	seen := map[HAID]bool{}
	for _, g := range groups {
		seen[g.ID] = true
		st := c.groups[g.ID]
		if st == nil {
			st = &haState{}
			c.groups[g.ID] = st
		}
		if r, ok := st.choose(now, c.grace, g, conn); ok {
			out[g.ID] = r
		}
	}
	for id := range c.groups {
		if !seen[id] {
			delete(c.groups, id)
		}
	}
	return out
}

func (st *haState) choose(now time.Time, grace time.Duration, g Group, conn ConnFunc) (Route, bool) {
	var cur *Route
	var curConn PeerConn
	for i := range g.Routes {
		if c, ok := conn(g.Routes[i].Peer); ok && g.Routes[i].Peer == st.chosen && !st.chosen.IsZero() {
			cur, curConn = &g.Routes[i], c
			break
		}
	}
	if cur != nil {
		if curConn.Connected {
			st.lostAt = time.Time{}
			return *cur, true
		}
		if st.lostAt.IsZero() {
			st.lostAt = now
		}
		if now.Sub(st.lostAt) < grace && !curConn.Left {
			return *cur, true
		}
		if best, ok := bestRoute(g, conn, true); ok && best.Peer != cur.Peer {
			st.chosen, st.lostAt = best.Peer, time.Time{}
			return best, true
		}
		return *cur, true // nothing better to go to: keep waiting for it
	}
	// None chosen yet, or the chosen peer left the map: choose at once.
	if best, ok := bestRoute(g, conn, true); ok {
		st.chosen, st.lostAt = best.Peer, time.Time{}
		return best, true
	}
	// No peer is connected yet: take the best by metric, so traffic starts
	// the connection, and give it the grace to come up before another one
	// that connects first takes over.
	if best, ok := bestRoute(g, conn, false); ok {
		st.chosen, st.lostAt = best.Peer, now
		return best, true
	}
	st.chosen, st.lostAt = key.Public{}, time.Time{}
	return Route{}, false
}

// bestRoute is the group's route with the lowest metric, then a direct
// connection over a relayed one, then the lowest key (so the choice is
// deterministic); connectedOnly skips peers without a path.
func bestRoute(g Group, conn ConnFunc, connectedOnly bool) (Route, bool) {
	var best Route
	var bestConn PeerConn
	found := false
	for _, r := range g.Routes {
		c, ok := conn(r.Peer)
		if !ok || (connectedOnly && !c.Connected) {
			continue
		}
		if !found || better(r, c, best, bestConn) {
			best, bestConn, found = r, c, true
		}
	}
	return best, found
}

func better(a Route, ac PeerConn, b Route, bc PeerConn) bool {
	if a.Metric != b.Metric {
		return a.Metric < b.Metric
	}
	if ac.Connected != bc.Connected {
		return ac.Connected
	}
	if ac.Relayed != bc.Relayed {
		return !ac.Relayed
	}
	return cmp.Compare(a.Peer.String(), b.Peer.String()) < 0
}
