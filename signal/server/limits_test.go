package server_test

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/proto/signalpb"
	"github.com/wiremesh/wiremesh/signal/server"
)

// Unary Send checks the sender as the stream path does: a message may only
// carry the key whose stream the same connection holds (or the key in the
// call's x-wiretrustee-peer-id). A forged key is refused and not delivered.
func TestUnarySendRefusesForgedSender(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, addr := startAt(t, server.Options{})
	victimConn, otherConn, eveConn := dial(t, addr), dial(t, addr), dial(t, addr)
	victim := connect(t, victimConn, ctx)
	other := connect(t, otherConn, ctx)
	eve := connect(t, eveConn, ctx)

	forged := sealed(t, eve.priv, other.priv, &signalpb.Body{Type: signalpb.Body_OFFER})
	forged.Key = victim.priv.Public().String() // eve claims to be victim
	_, dropped0 := srv.Stats()
	if _, err := eveConn.Send(ctx, forged); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("forged sender on another connection: %v, want PermissionDenied", err)
	}
	withHeader := metadata.AppendToOutgoingContext(ctx, server.HeaderPeerID, eve.priv.Public().String())
	if _, err := eveConn.Send(withHeader, forged); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("key differing from the call's peer id: %v, want PermissionDenied", err)
	}
	noStream, _ := key.NewPrivate()
	if _, err := eveConn.Send(ctx, sealed(t, noStream, other.priv, &signalpb.Body{})); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("sender without a stream: %v, want PermissionDenied", err)
	}
	if _, err := eveConn.Send(ctx, &signalpb.EncryptedMessage{Key: "not a key", RemoteKey: other.priv.Public().String()}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("malformed sender: %v, want InvalidArgument", err)
	}
	if _, d := srv.Stats(); d-dropped0 != 4 {
		t.Fatalf("refusals counted as drops: %d, want 4", d-dropped0)
	}
	// The genuine sender on its own connection still gets through, and the
	// first thing other receives is its message, not the forgery.
	real := sealed(t, victim.priv, other.priv, &signalpb.Body{Type: signalpb.Body_OFFER, Payload: "real"})
	if _, err := victimConn.Send(ctx, real); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, other.st, 2*time.Second); !proto.Equal(m, real) {
		t.Fatalf("got %v, want the genuine message", m)
	}
	// With the header, an empty key is the header's.
	hb := &signalpb.EncryptedMessage{RemoteKey: eve.priv.Public().String(), Body: []byte{1}}
	if _, err := eveConn.Send(withHeader, hb); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, eve.st, 2*time.Second); m.GetKey() != eve.priv.Public().String() {
		t.Fatalf("key %q, want the header's", m.GetKey())
	}
}

// floodBound is what the flood below may leave on the heap beyond the
// configured total cap: per-stream transport buffers (at most 64 KiB of
// each fake destination's stream) and the clients' receive windows.
const floodBound = 48 << 20

// A flood of maximum-size messages to many made-up destinations that never
// read stays within the total cap (plus floodBound), is counted as drops by
// reason, and leaves real delivery working.
func TestFloodToFakeDestinationsIsBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const (
		totalCap = 24 << 20
		dests    = 40
		senders  = 4
		perDest  = 2
	)
	srv, addr := startAt(t, server.Options{Limits: server.Limits{TotalBytes: totalCap}, SendTimeout: time.Minute})
	// Fake destinations: streams that register and never read, with the
	// smallest receive windows grpc allows (no BDP growth).
	sink := dial(t, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	fakes := make([]string, dests)
	for i := range fakes {
		k, _ := key.NewPrivate()
		connectAs(t, sink, ctx, k)
		fakes[i] = k.Public().String()
	}
	live := connect(t, dial(t, addr), ctx)

	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)

	body := bytes.Repeat([]byte{0xa5}, grpcserver.MaxMessage-1024)
	var wg sync.WaitGroup
	for i := 0; i < senders; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := dial(t, addr)
			k, _ := key.NewPrivate()
			connectAs(t, c, ctx, k)
			for n := 0; n < perDest; n++ {
				for _, d := range fakes {
					m := &signalpb.EncryptedMessage{Key: k.Public().String(), RemoteKey: d, Body: body}
					if _, err := c.Send(ctx, m); err != nil {
						t.Errorf("send: %v", err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	body = nil
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	growth := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	attempted := int64(senders * perDest * dests * grpcserver.MaxMessage)
	t.Logf("attempted %d MiB to %d fake destinations; heap grew %d MiB", attempted>>20, dests, growth>>20)
	if growth > totalCap+floodBound {
		t.Fatalf("heap grew %d MiB, want at most %d MiB (total cap %d MiB + %d MiB)", growth>>20, (totalCap+floodBound)>>20, totalCap>>20, floodBound>>20)
	}
	var out strings.Builder
	metrics.Write(&out, srv.Metrics())
	for _, want := range []string{`signal_messages_dropped_total{reason="total_full"}`, `signal_messages_dropped_total{reason="source_full"}`, "signal_queued_bytes"} {
		if !strings.Contains(out.String(), want) {
			t.Fatalf("metrics lack %s:\n%s", want, out.String())
		}
	}
	if _, dropped := srv.Stats(); dropped == 0 {
		t.Fatal("nothing dropped by the caps")
	}
	// A real peer still gets its messages.
	fromConn := dial(t, addr)
	sender := connect(t, fromConn, ctx)
	m := sealed(t, sender.priv, live.priv, &signalpb.Body{Type: signalpb.Body_OFFER, Payload: "still works"})
	if _, err := fromConn.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	if got := recvWithin(t, live.st, 2*time.Second); !proto.Equal(got, m) {
		t.Fatal("live peer did not get its message during the flood")
	}
}

// One sender cannot fill another destination's queue beyond its caps, and
// the per-destination count cap drops, not blocks.
func TestQueueCapsDropInsteadOfBlocking(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	srv, addr := startAt(t, server.Options{Limits: server.Limits{DestMessages: 4, SourceMessages: 10}, SendTimeout: time.Minute})
	sink := dial(t, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	a, b, d := connect(t, sink, ctx), connect(t, sink, ctx), connect(t, sink, ctx)
	c := dial(t, addr)
	s := connect(t, c, ctx)
	big := bytes.Repeat([]byte{1}, 512<<10) // two fill a stream's transport buffer
	for i := 0; i < 40; i++ {
		for _, d := range []*peer{a, b, d} {
			m := &signalpb.EncryptedMessage{Key: s.priv.Public().String(), RemoteKey: d.priv.Public().String(), Body: big}
			sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := c.Send(sctx, m)
			scancel()
			if err != nil {
				t.Fatalf("send %d blocked or failed: %v", i, err)
			}
		}
	}
	var out strings.Builder
	metrics.Write(&out, srv.Metrics())
	for _, reason := range []string{"dest_full", "source_full"} {
		line := fmt.Sprintf(`signal_messages_dropped_total{reason="%s"} `, reason)
		i := strings.Index(out.String(), line)
		if i < 0 || strings.HasPrefix(out.String()[i+len(line):], "0\n") {
			t.Fatalf("no %s drops:\n%s", reason, out.String())
		}
	}
}

// Streams beyond MaxStreams are refused with ResourceExhausted.
func TestStreamTableCapped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, c := start(t, server.Options{MaxStreams: 2})
	connect(t, c, ctx)
	connect(t, c, ctx)
	k, _ := key.NewPrivate()
	st, err := c.ConnectStream(metadata.AppendToOutgoingContext(ctx, server.HeaderPeerID, k.Public().String()))
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("third stream: %v, want ResourceExhausted", err)
	}
}

// A peer id of 44 base64 characters that decode to 33 bytes used to panic
// the key parser and crash the server.
func TestOverlongPeerIDRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, c := start(t, server.Options{})
	const overlong = "rJCUs0hLK4ndZCMQKB4UbXR05x/2AmfTPeqRyuo/YXE0"
	st, err := c.ConnectStream(metadata.AppendToOutgoingContext(ctx, server.HeaderPeerID, overlong))
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("overlong peer id: %v, want InvalidArgument", err)
	}
	connect(t, c, ctx) // still serving
}

// Destinations that take one large message each and never read again pin
// the total budget; when it is full they are disconnected (after
// SendTimeout), so real traffic flows again.
func TestFullBudgetReclaimsUndrainedStreams(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv, addr := startAt(t, server.Options{Limits: server.Limits{TotalBytes: 4 << 20}, SendTimeout: 300 * time.Millisecond})
	sink := dial(t, addr, grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	c := dial(t, addr)
	s := connect(t, c, ctx)
	big := bytes.Repeat([]byte{7}, 900<<10)
	for i := 0; i < 8; i++ {
		d := connect(t, sink, ctx)
		m := &signalpb.EncryptedMessage{Key: s.priv.Public().String(), RemoteKey: d.priv.Public().String(), Body: big}
		if _, err := c.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	live := connect(t, dial(t, addr), ctx)
	got := make(chan struct{}, 16)
	go func() {
		for {
			if _, err := live.st.Recv(); err != nil {
				return
			}
			got <- struct{}{}
		}
	}()
	for n := 0; ; n++ {
		m := &signalpb.EncryptedMessage{Key: s.priv.Public().String(), RemoteKey: live.priv.Public().String(), Body: big}
		if _, err := c.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
		select {
		case <-got:
			var out strings.Builder
			metrics.Write(&out, srv.Metrics())
			if n == 0 {
				t.Fatalf("budget was not full: first message delivered\n%s", out.String())
			}
			if strings.Contains(out.String(), "signal_streams_reclaimed_total 0\n") {
				t.Fatalf("delivered without reclaiming:\n%s", out.String())
			}
			return // refused while full, delivered after reclaiming
		case <-time.After(200 * time.Millisecond): // dropped: the budget is full
		case <-ctx.Done():
			t.Fatal("never delivered")
		}
	}
}
