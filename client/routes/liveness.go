package routes

import (
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
)

// A routing peer can die without its connection noticing for a while: ICE
// takes seconds to call a path disconnected, and a relayed path stays
// "connected" as long as the relay server is up, whatever happened to the
// peer behind it. Liveness watches WireGuard itself for the routing peers
// in use: a peer we keep sending to that sends nothing back is asked for a
// WireGuard handshake, which any live WireGuard peer (ours or NetBird's)
// answers at once over whatever path carries the traffic; no answer means
// the peer is gone. A quiet link (nothing sent) or one-way traffic that the
// handshake shows to be fine never condemns a peer.

// Liveness timings (DefaultLiveness): a peer is declared gone within
// Silence + ProbeWait of the first packet it left unanswered, plus the
// caller's polling interval for each of the two steps.
type LivenessConfig struct {
	// Silence is how long a peer may leave what we sent unanswered before
	// it is probed.
	Silence time.Duration
	// ProbeWait is how long the probe's answer may take.
	ProbeWait time.Duration
	// ProbeEvery is the least time between probes of a peer that sent
	// nothing but the answer (and keepalives) since the last one: a probe
	// holds outgoing packets for a round trip, so steady one-way traffic
	// (which the peer never answers but with WireGuard's passive
	// keepalive, every 10 s) is probed at most this often. A peer that
	// answered traffic since may be probed at once.
	ProbeEvery time.Duration
}

// DefaultLiveness declares a dead routing peer gone about 2 s after
// traffic to it stops being answered.
var DefaultLiveness = LivenessConfig{Silence: 750 * time.Millisecond, ProbeWait: time.Second, ProbeEvery: 10 * time.Second}

// jitter is how much earlier than due a wait may be found over: a caller
// polling every interval observes at slightly uneven times, and a wait
// found short by microseconds must not cost a whole interval.
const jitter = 20 * time.Millisecond

func elapsed(now, since time.Time, d time.Duration) bool { return now.Sub(since) >= d-jitter }

// WGStats is what Liveness reads of a WireGuard peer.
type WGStats struct {
	Rx, Tx        int64
	LastHandshake time.Time
}

// Verdict is Liveness's view of one peer.
type Verdict int

const (
	// Alive: answering, or nothing to judge by.
	Alive Verdict = iota
	// Probe: the caller must start a WireGuard handshake with the peer now.
	Probe
	// Gone: the peer left traffic and a handshake unanswered.
	Gone
)

// keepaliveLen is the size of a WireGuard keepalive (an empty transport
// message). Our own persistent keepalives are not traffic that expects an
// answer, so tx growing by no more than this does not count as sending.
const keepaliveLen = 32

// handshakeAnswerLen is the size of a WireGuard handshake response: what a
// probe brings back.
const handshakeAnswerLen = 92

type liveState struct {
	rx, tx   int64
	hs       time.Time
	seenAt   time.Time // the previous observation
	sentAt   time.Time // first unanswered send since the peer was last heard
	probedAt time.Time // the last probe
	gone     bool
	// asked: probe at the next observation whatever the traffic (ProbeNow).
	asked bool
}

// Liveness judges routing peers from successive WireGuard counters. It is
// not safe for concurrent use.
type Liveness struct {
	cfg   LivenessConfig
	peers map[key.Public]*liveState
}

// NewLiveness returns a Liveness with cfg (DefaultLiveness for zero fields).
func NewLiveness(cfg LivenessConfig) *Liveness {
	if cfg.Silence == 0 {
		cfg.Silence = DefaultLiveness.Silence
	}
	if cfg.ProbeWait == 0 {
		cfg.ProbeWait = DefaultLiveness.ProbeWait
	}
	if cfg.ProbeEvery == 0 {
		cfg.ProbeEvery = DefaultLiveness.ProbeEvery
	}
	return &Liveness{cfg: cfg, peers: map[key.Public]*liveState{}}
}

// Observe takes the counters, at time now, of the peers to watch and
// returns the verdict on each of them. Peers not passed are forgotten, so
// the caller passes the peers in use plus those it still holds gone (a
// gone peer stays gone until it sends again).
func (l *Liveness) Observe(now time.Time, watch map[key.Public]WGStats) map[key.Public]Verdict {
	out := make(map[key.Public]Verdict, len(watch))
	for k, s := range watch {
		st := l.peers[k]
		if st == nil {
			l.peers[k] = &liveState{rx: s.Rx, tx: s.Tx, hs: s.LastHandshake, seenAt: now}
			out[k] = Alive
			continue
		}
		out[k] = l.judge(now, st, s)
	}
	for k := range l.peers {
		if _, ok := watch[k]; !ok {
			delete(l.peers, k)
		}
	}
	return out
}

// ProbeNow asks for peer k to be probed at its next observation, whatever
// its traffic, and declared gone if that probe stays unanswered for
// ProbeWait: the peer hinted that it is going away (a GO_IDLE that does
// not prove it). It reports whether k is watched; a peer not watched (no
// routing peer in use) has nothing to move and is left alone.
func (l *Liveness) ProbeNow(k key.Public) bool {
	st := l.peers[k]
	if st == nil {
		return false
	}
	st.asked = true
	return true
}

func (l *Liveness) judge(now time.Time, st *liveState, s WGStats) Verdict {
	rx, handshook := s.Rx-st.rx, s.LastHandshake.After(st.hs)
	heard := rx > 0 || handshook
	// Traffic from the peer, not only a handshake answer or a keepalive:
	// it answers what we send, so a silence after this is not one-way
	// traffic and may be probed at once (see ProbeEvery).
	data := (!handshook && rx > keepaliveLen) || rx > handshakeAnswerLen+keepaliveLen
	sent := s.Tx-st.tx > keepaliveLen
	// Counters going back mean WireGuard recreated the peer: start over.
	if s.Rx < st.rx || s.Tx < st.tx {
		heard, sent = true, false
	}
	st.rx, st.tx, st.hs = s.Rx, s.Tx, s.LastHandshake
	prev := st.seenAt
	st.seenAt = now
	if st.asked && !st.gone {
		// What came since the previous observation may predate the hint:
		// only an answer to a probe sent now shows the peer is still
		// there. Counting the silence from now makes the probe's answer
		// overdue after ProbeWait (below), with no ProbeEvery spacing.
		st.asked = false
		st.sentAt, st.probedAt = now, now
		return Probe
	}
	st.asked = false
	if heard {
		st.sentAt, st.gone = time.Time{}, false
		if data {
			st.probedAt = time.Time{}
		}
		return Alive
	}
	if st.gone {
		return Gone
	}
	if sent && st.sentAt.IsZero() {
		// The send happened since the previous observation: counting from
		// then keeps the caller's polling interval out of the detection
		// time (a live peer probed a little early costs one round trip).
		st.sentAt = prev
	}
	if st.sentAt.IsZero() || !elapsed(now, st.sentAt, l.cfg.Silence) {
		return Alive // nothing unanswered, or not for long
	}
	if !st.probedAt.IsZero() && !st.probedAt.Before(st.sentAt) {
		// Probed during this silence: gone once the answer is overdue.
		if elapsed(now, st.probedAt, l.cfg.ProbeWait) {
			st.gone = true
			return Gone
		}
		return Alive
	}
	if !st.probedAt.IsZero() && !elapsed(now, st.probedAt, l.cfg.ProbeEvery) {
		// The last probe was answered moments ago and nothing but
		// handshakes and keepalives came since: one-way traffic.
		return Alive
	}
	st.probedAt = now
	return Probe
}
