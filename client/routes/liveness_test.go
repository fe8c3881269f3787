package routes

import (
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
)

func TestLiveness(t *testing.T) {
	const ms = time.Millisecond
	t0 := time.Unix(1_700_000_000, 0)
	hs0 := t0.Add(-time.Minute) // the handshake before the test starts
	type step struct {
		at     time.Duration
		rx, tx int64
		hs     time.Duration // last handshake, relative to t0 (0: hs0)
		want   Verdict
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"answered traffic stays alive", []step{
			{0, 100, 100, 0, Alive},
			{500 * ms, 200, 200, 0, Alive},
			{time.Second, 300, 300, 0, Alive},
			{5 * time.Second, 400, 400, 0, Alive},
		}},
		{"a quiet link is never probed", []step{
			{0, 100, 100, 0, Alive},
			{time.Minute, 100, 100, 0, Alive},
			{2 * time.Minute, 100, 100 + keepaliveLen, 0, Alive}, // our keepalive only
			{3 * time.Minute, 100, 100 + keepaliveLen, 0, Alive},
		}},
		{"a dead peer: probed after the silence, gone after the probe wait", []step{
			{0, 100, 100, 0, Alive},
			{500 * ms, 100, 100, 0, Alive},
			{1000 * ms, 100, 200, 0, Alive}, // sent since 500 ms, unanswered
			{1500 * ms, 100, 300, 0, Probe},
			{2000 * ms, 100, 700, 0, Alive},
			{2500 * ms, 100, 800, 0, Gone}, // < 2.5 s after the first unanswered send
			{time.Minute, 100, 900, 0, Gone},
			{time.Minute + 500*ms, 150, 900, 0, Alive}, // it sends again
		}},
		{"one-way traffic: the probe's answer keeps it alive", []step{
			{0, 100, 100, 0, Alive},
			{500 * ms, 100, 1000, 0, Alive},
			{1000 * ms, 100, 1500, 0, Probe},         // unanswered since 0 ms at most
			{1500 * ms, 192, 2000, 1400 * ms, Alive}, // handshake answered
			{2000 * ms, 192, 3000, 1400 * ms, Alive},
			{4000 * ms, 192, 5000, 1400 * ms, Alive}, // silent again, but too soon to probe
			{10500 * ms, 192, 6000, 1400 * ms, Alive},
			{11000 * ms, 192, 7000, 1400 * ms, Probe}, // ProbeEvery after the last probe
			{11500 * ms, 284, 8000, 11400 * ms, Alive},
			{20 * time.Second, 376, 9000, 11400 * ms, Alive}, // WireGuard's passive keepalive
		}},
		{"a handshake just before the peer died does not delay the probe", []step{
			{0, 100, 100, 0, Alive},
			{500 * ms, 200, 200, 400 * ms, Alive}, // a handshake completes
			{1000 * ms, 200, 300, 400 * ms, Alive},
			{2000 * ms, 200, 400, 400 * ms, Probe},
			{3000 * ms, 200, 600, 400 * ms, Gone},
		}},
		{"a peer that answered traffic since the last probe is probed again at once", []step{
			{0, 100, 100, 0, Alive},
			{500 * ms, 100, 1000, 0, Alive},
			{1000 * ms, 100, 1500, 0, Probe},
			{1500 * ms, 192, 2000, 1400 * ms, Alive},  // the answer
			{2000 * ms, 1192, 3000, 1400 * ms, Alive}, // traffic both ways
			{2500 * ms, 1192, 3500, 1400 * ms, Alive}, // then it dies
			{3500 * ms, 1192, 4000, 1400 * ms, Probe},
			{4500 * ms, 1192, 4500, 1400 * ms, Gone},
		}},
		{"keepalives between probes do not lift the limit", []step{
			{0, 100, 100, 0, Alive},
			{500 * ms, 100, 1000, 0, Alive},
			{1000 * ms, 100, 1500, 0, Probe},
			{1500 * ms, 192, 2000, 1400 * ms, Alive},
			{2000 * ms, 192 + keepaliveLen, 3000, 1400 * ms, Alive},
			{4000 * ms, 192 + keepaliveLen, 4000, 1400 * ms, Alive},
			{10500 * ms, 192 + keepaliveLen, 5000, 1400 * ms, Alive},
			{11000 * ms, 192 + keepaliveLen, 6000, 1400 * ms, Probe},
		}},
		{"polling a little early does not cost an interval", []step{
			{0, 100, 100, 0, Alive},
			{250 * ms, 100, 200, 0, Alive},
			{750*ms - 5*ms, 100, 300, 0, Probe},
			{1750*ms - 3*ms, 100, 400, 0, Gone},
		}},
		{"counters reset (peer recreated): start over", []step{
			{0, 100, 100, 0, Alive},
			{500 * ms, 100, 200, 0, Alive},
			{1000 * ms, 100, 300, 0, Probe},
			{2000 * ms, 0, 0, 0, Alive},
			{3000 * ms, 0, 0, 0, Alive},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLiveness(LivenessConfig{})
			k := testKey(t, 1)
			for i, s := range tc.steps {
				hs := hs0
				if s.hs != 0 {
					hs = t0.Add(s.hs)
				}
				got := l.Observe(t0.Add(s.at), map[key.Public]WGStats{k: {Rx: s.rx, Tx: s.tx, LastHandshake: hs}})
				if got[k] != s.want {
					t.Fatalf("step %d (at %v): verdict %d, want %d", i, s.at, got[k], s.want)
				}
			}
		})
	}
}

func TestLivenessForgetsPeers(t *testing.T) {
	l := NewLiveness(LivenessConfig{})
	now := time.Unix(1_700_000_000, 0)
	a, b := testKey(t, 1), testKey(t, 2)
	l.Observe(now, map[key.Public]WGStats{a: {}, b: {}})
	l.Observe(now.Add(time.Second), map[key.Public]WGStats{b: {}})
	if _, ok := l.peers[a]; ok || len(l.peers) != 1 {
		t.Fatalf("liveness keeps %d peers, want only b", len(l.peers))
	}
}

// TestLivenessProbeNow: a GO_IDLE hint (ProbeNow) probes the peer at the
// next observation whatever its traffic and the ProbeEvery spacing; the
// peer is gone once that probe stays unanswered for ProbeWait, and stays
// alive if it answers.
func TestLivenessProbeNow(t *testing.T) {
	const ms = time.Millisecond
	t0 := time.Unix(1_700_000_000, 0)
	hs0 := t0.Add(-time.Minute)
	type step struct {
		at     time.Duration
		hint   bool // ProbeNow before this observation
		rx, tx int64
		hs     time.Duration // last handshake, relative to t0 (0: hs0)
		want   Verdict
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"a quiet peer that left: probed at once, gone after the probe wait", []step{
			{0, false, 100, 100, 0, Alive},
			{250 * ms, true, 100, 100, 0, Probe},
			{500 * ms, false, 100, 100 + handshakeAnswerLen, 0, Alive},
			{1000 * ms, false, 100, 100 + handshakeAnswerLen, 0, Alive},
			{1250 * ms, false, 100, 100 + handshakeAnswerLen, 0, Gone},
			{time.Minute, true, 100, 100 + handshakeAnswerLen, 0, Gone}, // a hint does not revive it
		}},
		{"traffic received before the hint proves nothing", []step{
			{0, false, 100, 100, 0, Alive},
			{250 * ms, true, 5000, 5000, 0, Probe},
			{1250 * ms, false, 5000, 5200, 0, Gone},
		}},
		{"a peer that answers the probe stays alive", []step{
			{0, false, 100, 100, 0, Alive},
			{250 * ms, true, 100, 100, 0, Probe},
			{500 * ms, false, 192, 200, 400 * ms, Alive},
			{2000 * ms, false, 192, 200, 400 * ms, Alive},
			{5000 * ms, false, 192, 200, 400 * ms, Alive},
		}},
		{"a hint right after a probe still probes (no ProbeEvery spacing)", []step{
			{0, false, 100, 100, 0, Alive},
			{500 * ms, false, 100, 1000, 0, Alive},
			{1000 * ms, false, 100, 1500, 0, Probe},
			{1500 * ms, false, 192, 2000, 1400 * ms, Alive},
			{1750 * ms, true, 192, 2000, 1400 * ms, Probe},
			{2750 * ms, false, 192, 2100, 1400 * ms, Gone},
		}},
		{"without a hint the same quiet peer is never probed", []step{
			{0, false, 100, 100, 0, Alive},
			{250 * ms, false, 100, 100, 0, Alive},
			{5000 * ms, false, 100, 100, 0, Alive},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLiveness(LivenessConfig{})
			k := testKey(t, 1)
			for i, s := range tc.steps {
				if s.hint && !l.ProbeNow(k) {
					t.Fatalf("step %d: ProbeNow on a watched peer reported it unwatched", i)
				}
				hs := hs0
				if s.hs != 0 {
					hs = t0.Add(s.hs)
				}
				got := l.Observe(t0.Add(s.at), map[key.Public]WGStats{k: {Rx: s.rx, Tx: s.tx, LastHandshake: hs}})
				if got[k] != s.want {
					t.Fatalf("step %d (at %v): verdict %d, want %d", i, s.at, got[k], s.want)
				}
			}
		})
	}
	t.Run("a peer not watched is left alone", func(t *testing.T) {
		l := NewLiveness(LivenessConfig{})
		if l.ProbeNow(testKey(t, 2)) {
			t.Fatal("ProbeNow on an unwatched peer reported it watched")
		}
		if len(l.peers) != 0 {
			t.Fatal("ProbeNow created state for an unwatched peer")
		}
	})
}
