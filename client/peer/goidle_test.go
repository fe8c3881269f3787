package peer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/pion/ice/v4"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/signalpb"
)

type recordSignaler struct {
	to   key.Public
	body *signalpb.Body
	err  error
}

func (r *recordSignaler) Send(_ context.Context, to key.Public, b *signalpb.Body) error {
	r.to, r.body = to, b
	return r.err
}

// chanSignaler hands every body sent to the test (sends come from
// goroutines).
type chanSignaler chan *signalpb.Body

func (c chanSignaler) Send(_ context.Context, _ key.Public, b *signalpb.Body) error {
	c <- b
	return nil
}

// TestGoIdle: the message is NetBird's GO_IDLE body, addressed to the peer,
// carrying the session id of our latest offer or answer (none before we
// sent one), and a failed send is reported.
func TestGoIdle(t *testing.T) {
	var remote key.Public
	remote[0] = 7
	sig := &recordSignaler{}
	c := &Conn{cfg: Config{Remote: remote}, sig: sig}
	if err := c.GoIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sig.to != remote || sig.body.GetType() != signalpb.Body_GO_IDLE || sig.body.GetPayload() != "" || len(sig.body.GetSessionId()) != 0 {
		t.Fatalf("sent %v to %v, want an empty GO_IDLE to %v", sig.body, sig.to, remote)
	}

	// An offer goes out: the GO_IDLE now names its session.
	offers := make(chanSignaler, 4)
	s := &session{id: []byte{1, 2, 3, 4, 5}, ufrag: "u", pwd: "p"}
	c = &Conn{cfg: Config{Remote: remote}, sig: offers}
	c.send(context.Background(), s, signalpb.Body_OFFER)
	select {
	case b := <-offers:
		if !bytes.Equal(b.GetSessionId(), s.id) {
			t.Fatalf("offer carries session %x, want %x", b.GetSessionId(), s.id)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no offer sent")
	}
	c.sig = sig
	if err := c.GoIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sig.body.GetSessionId(), s.id) {
		t.Fatalf("GO_IDLE carries session %x, want the offer's %x", sig.body.GetSessionId(), s.id)
	}

	sig.err = errors.New("signal down")
	if err := c.GoIdle(context.Background()); !errors.Is(err, sig.err) {
		t.Fatalf("err = %v, want it to wrap %v", err, sig.err)
	}
}

// TestOnGoIdle: only a GO_IDLE naming the remote's current session (from
// its latest offer or answer) ends the connection; one without a session
// id (NetBird's clients), with a stale id, or replayed after it was acted
// on is only a hint: the session stays open, the peer is not marked as
// left, and the caller is asked to probe it. A replayed offer cannot
// re-arm an ended session.
func TestOnGoIdle(t *testing.T) {
	old, cur, next := []byte{1, 1, 1, 1, 1}, []byte{2, 2, 2, 2, 2}, []byte{3, 3, 3, 3, 3}
	offer := func(id []byte) *signalpb.Body { return &signalpb.Body{Type: signalpb.Body_OFFER, SessionId: id} }
	answer := func(id []byte) *signalpb.Body { return &signalpb.Body{Type: signalpb.Body_ANSWER, SessionId: id} }
	goIdle := func(id []byte) *signalpb.Body { return &signalpb.Body{Type: signalpb.Body_GO_IDLE, SessionId: id} }
	type step struct {
		body *signalpb.Body
		left bool // for a GO_IDLE: it ends the connection
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"matching session id: left", []step{{offer(old), false}, {offer(cur), false}, {goIdle(cur), true}}},
		{"matching id from an answer: left", []step{{answer(cur), false}, {goIdle(cur), true}}},
		{"no session id (NetBird's client): hint", []step{{offer(cur), false}, {goIdle(nil), false}}},
		{"replayed GO_IDLE of an older session: hint", []step{{offer(old), false}, {offer(cur), false}, {goIdle(old), false}}},
		{"before any offer: hint", []step{{goIdle(cur), false}}},
		{"the same GO_IDLE replayed after acting: hint", []step{{offer(cur), false}, {goIdle(cur), true}, {goIdle(cur), false}}},
		{"a replayed offer does not re-arm an ended session", []step{
			{offer(cur), false}, {goIdle(cur), true}, {offer(next), false}, {offer(cur), false}, {goIdle(cur), false}, {goIdle(next), true},
		}},
		{"an offer without session id keeps the known one", []step{{offer(cur), false}, {offer(nil), false}, {goIdle(cur), true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var lefts, hints int
			c := &Conn{
				cfg: Config{Log: slog.New(slog.DiscardHandler),
					OnLeft: func() { lefts++ }, OnIdleHint: func() { hints++ }},
				log:    slog.New(slog.DiscardHandler),
				events: make(chan any, 64), done: make(chan struct{}),
				status: Status{State: "Connected"},
			}
			c.rl.backoff = time.Hour
			defer c.closeRelay(&c.rl)
			for i, st := range tc.steps {
				if st.body.GetType() != signalpb.Body_GO_IDLE {
					c.noteRemoteSession(st.body.GetSessionId()) // as the loop does
					continue
				}
				s := testSession(t)
				wantLefts, wantHints := lefts+1, hints
				if !st.left {
					wantLefts, wantHints = lefts, hints+1
				}
				c.status = Status{State: "Connected"}
				got := c.onGoIdle(st.body, s)
				if got != st.left {
					t.Fatalf("step %d: onGoIdle = %v, want %v", i, got, st.left)
				}
				if lefts != wantLefts || hints != wantHints {
					t.Fatalf("step %d: OnLeft called %d times, OnIdleHint %d; want %d and %d", i, lefts, hints, wantLefts, wantHints)
				}
				_, err := s.agent.GetLocalCandidates()
				if closed := err != nil; closed != st.left {
					t.Fatalf("step %d: session closed = %v, want %v", i, closed, st.left)
				}
				if stt := c.Status(); stt.Left != st.left || (stt.State == "Connected") == st.left {
					t.Fatalf("step %d: status %+v after GO_IDLE, want left = %v", i, stt, st.left)
				}
				c.closeSession(s)
			}
		})
	}
}

// testSession is a session with a real (not gathering) ICE agent, closed
// when the test ends.
func testSession(t *testing.T) *session {
	t.Helper()
	agent, err := ice.NewAgentWithOptions(
		ice.WithNetworkTypes([]ice.NetworkType{ice.NetworkTypeUDP4}),
		ice.WithMulticastDNSMode(ice.MulticastDNSModeDisabled),
	)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = agent.Close() })
	return &session{agent: agent}
}

// TestLeftStatus: a peer that left stays marked so through the loop's
// status resets (new sessions), and is no longer once connected again.
func TestLeftStatus(t *testing.T) {
	c := &Conn{status: Status{State: "Connected"}}
	c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since, Left: true} })
	if !c.Status().Left {
		t.Fatal("GO_IDLE did not mark the peer as left")
	}
	c.setStatus(func(st *Status) { *st = Status{State: "Connecting", Since: st.Since} }) // a new session
	if !c.Status().Left {
		t.Fatal("a new session cleared the mark")
	}
	c.setStatus(func(st *Status) { st.State = "Connected" })
	if c.Status().Left {
		t.Fatal("a peer connected again is still marked as left")
	}
}
