package server

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/relaywire"
)

// TestTokenBoundToPeer: a token management issued for peer A does not let
// anyone authenticate as B (which would take B's connection over, the
// newest connection of an ID winning); unbound tokens are refused unless
// the operator allows them.
func TestTokenBoundToPeer(t *testing.T) {
	exp := time.Now().Add(time.Hour)
	a, b := relaywire.HashID("peer-a"), relaywire.HashID("peer-b")
	t.Run("refused", func(t *testing.T) {
		l := newLab(t, nil)
		victim := l.connect("peer-b")
		for name, msg := range map[string][]byte{
			"A's token as B": relaywire.Auth(b, boundToken(t, secret, exp, a)),
			"unbound as B":   relaywire.Auth(b, token(t, secret, exp)),
		} {
			t.Run(name, func(t *testing.T) {
				c := l.dial("peer-b")
				c.send(msg)
				c.expectClosed()
			})
		}
		// The victim kept its connection: it still gets what is sent to it.
		other := l.connect("peer-a")
		other.send(relaywire.Transport(b, []byte("still yours")))
		if _, got, _ := relaywire.ParseTransport(victim.recv()); string(got) != "still yours" {
			t.Fatalf("victim got %q", got)
		}
		if l.srv.m.tokensOtherPeer.Load() != 1 || l.srv.m.tokensUnbound.Load() != 1 {
			t.Fatalf("refusal counters: other peer %d, unbound %d (want 1, 1)", l.srv.m.tokensOtherPeer.Load(), l.srv.m.tokensUnbound.Load())
		}
	})
	t.Run("unbound allowed by option", func(t *testing.T) {
		l := newLab(t, func(o *Options) { o.AllowUnboundTokens = true })
		c := l.dial("peer-b")
		c.send(relaywire.Auth(b, token(t, secret, exp)))
		if _, err := relaywire.ParseAuthResponse(c.recv()); err != nil {
			t.Fatal(err)
		}
		// Even then a bound token only serves its own peer.
		d := l.dial("peer-b")
		d.send(relaywire.Auth(b, boundToken(t, secret, exp, a)))
		d.expectClosed()
	})
}

// TestSubscriptionFloodCapped: one authenticated peer subscribing to a
// million distinct IDs (the reference keeps them all, about 800 MB) holds
// at most its per-peer cap, and the heap grows by at most 16 MiB.
func TestSubscriptionFloodCapped(t *testing.T) {
	l := newLab(t, nil)
	c := l.connect("flooder")
	heap := func() uint64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.HeapAlloc
	}
	before := heap()
	const total = 1_000_000
	ids := make([]relaywire.PeerID, relaywire.MaxIDsPerMessage)
	for sent := 0; sent < total; {
		n := min(len(ids), total-sent)
		for i := range n {
			ids[i] = relaywire.HashID(fmt.Sprint(sent + i))
		}
		c.send(relaywire.PeerList(relaywire.TypeSubscribe, ids[:n])[0])
		sent += n
	}
	// A round trip: the reader handles messages in order, so a transport
	// sent after the flood arrives once the flood was processed.
	anchor := l.connect("anchor")
	c.send(relaywire.Transport(anchor.id, []byte("done")))
	if _, got, _ := relaywire.ParseTransport(anchor.recv()); string(got) != "done" {
		t.Fatalf("anchor got %q", got)
	}
	st := l.srv.Stats()
	if want := DefaultMaxSubscriptionsPerPeer; st.Subscriptions != want || st.OfflineWatches != want {
		t.Fatalf("after %d subscriptions: %+v, want %d held", total, st, want)
	}
	if got, want := l.srv.m.subsRefused.Load(), int64(total-DefaultMaxSubscriptionsPerPeer); got != want {
		t.Fatalf("refused %d, want %d", got, want)
	}
	const bound = 16 << 20
	if after := heap(); after > before+bound {
		t.Fatalf("heap grew by %d MiB, bound %d MiB", (after-before)>>20, bound>>20)
	}
	// Unsubscribing gives room back.
	c.send(relaywire.PeerList(relaywire.TypeUnsubscribe, []relaywire.PeerID{relaywire.HashID("0")})[0])
	c.send(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{anchor.id})[0])
	c.expectList(relaywire.TypePeersOnline, anchor.id)
}

// TestSubscriptionsCappedOverall: the overall cap holds across peers, and
// a peer leaving frees its share.
func TestSubscriptionsCappedOverall(t *testing.T) {
	l := newLab(t, func(o *Options) { o.MaxSubscriptionsPerPeer, o.MaxSubscriptions = 10, 15 })
	anchor := l.connect("anchor")
	sub := func(c *client, n int, tag string) {
		ids := []relaywire.PeerID{}
		for i := range n {
			ids = append(ids, relaywire.HashID(fmt.Sprint(tag, i)))
		}
		c.send(relaywire.PeerList(relaywire.TypeSubscribe, ids)[0])
	}
	a, b := l.connect("a"), l.connect("b")
	sub(a, 20, "a")
	sub(b, 20, "b")
	// Each is answered at once for the anchor only if it had room for it.
	a.send(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{anchor.id})[0])
	b.send(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{anchor.id})[0])
	if m, err := a.recvErr(300 * time.Millisecond); err == nil {
		t.Fatalf("a over its cap was answered %x", m)
	}
	if st := l.srv.Stats(); st.Subscriptions != 15 {
		t.Fatalf("held %+v, want 15", st)
	}
	a.send(relaywire.Simple(relaywire.TypeClose))
	a.expectClosed()
	c := l.connect("c")
	c.send(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{anchor.id})[0])
	c.expectList(relaywire.TypePeersOnline, anchor.id)
}

// TestQueueBytesCapped: datagrams for a peer that does not read pile up to
// the per-peer byte cap, not to SendQueue messages of 8 kB each.
func TestQueueBytesCapped(t *testing.T) {
	const capBytes = 64 << 10
	l := newLab(t, func(o *Options) { o.QueueBytesPerPeer = capBytes })
	src := l.connect("src")
	// The sink authenticates, then never reads again: its TCP buffers fill,
	// its writer blocks, and its queue fills.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sink, err := relayconn.DialWS(ctx, l.url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	sinkID := relaywire.HashID("sink")
	if err := sink.WriteMessage(ctx, relaywire.Auth(sinkID, boundToken(t, secret, time.Now().Add(time.Hour), sinkID))); err != nil {
		t.Fatal(err)
	}
	if _, err := sink.ReadMessage(ctx); err != nil {
		t.Fatal(err)
	}
	payload := make([]byte, 8000)
	for i := 0; l.srv.m.droppedQueueBytes.Load() == 0; i++ {
		if i > 20000 {
			t.Fatalf("160 MB sent to a peer that does not read and nothing dropped at the byte cap: %+v", l.srv.Stats())
		}
		src.send(relaywire.Transport(sinkID, payload))
	}
	if st := l.srv.Stats(); st.QueuedBytes > capBytes {
		t.Fatalf("queued %d bytes, cap %d", st.QueuedBytes, capBytes)
	}
	sink.Close()
	// The sink's leftovers go back to the overall budget when it is gone.
	deadline := time.Now().Add(10 * time.Second)
	for l.srv.Stats().QueuedBytes != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("queued bytes after the sink left: %+v", l.srv.Stats())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestHandshakesCapped: connections that never authenticate are capped
// per source address (and overall); the excess is closed at once.
func TestHandshakesCapped(t *testing.T) {
	l := newLab(t, func(o *Options) { o.MaxHandshakesPerSource = 2 })
	idle1, _ := l.dial("x"), l.dial("y")
	deadline := time.Now().Add(5 * time.Second)
	for l.srv.Stats().Handshakes != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("handshakes %+v", l.srv.Stats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	extra := l.dial("z")
	extra.expectClosed() // well before the 10 s handshake timeout
	if l.srv.m.handshakesRefused.Load() != 1 {
		t.Fatalf("refused %d", l.srv.m.handshakesRefused.Load())
	}
	// Authenticating frees the slot.
	idle1.send(relaywire.Auth(idle1.id, boundToken(t, secret, time.Now().Add(time.Hour), idle1.id)))
	idle1.recv()
	l.connect("w")
}
