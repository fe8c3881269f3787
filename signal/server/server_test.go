package server_test

import (
	"bytes"
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/signalpb"
	"github.com/wiremesh/wiremesh/signal/server"
)

func start(t testing.TB, o server.Options) (*server.Server, signalpb.SignalExchangeClient) {
	t.Helper()
	s, addr := startAt(t, o)
	return s, dial(t, addr)
}

// startAt serves a signal server on loopback and returns its address.
func startAt(t testing.TB, o server.Options) (*server.Server, string) {
	t.Helper()
	o.Log = slog.New(slog.DiscardHandler)
	s := server.New(o)
	g := grpcserver.New()
	s.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcserver.Serve(ctx, ln, g, http.NotFoundHandler(), o.Log, time.Second)
	}()
	t.Cleanup(func() { s.Close(); cancel(); <-done })
	return s, ln.Addr().String()
}

// dial opens a client connection of its own (one transport connection).
func dial(t testing.TB, addr string, opts ...grpc.DialOption) signalpb.SignalExchangeClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return signalpb.NewSignalExchangeClient(conn)
}

type peer struct {
	priv key.Private
	st   grpc.BidiStreamingClient[signalpb.EncryptedMessage, signalpb.EncryptedMessage]
}

func connect(t *testing.T, c signalpb.SignalExchangeClient, ctx context.Context) *peer {
	t.Helper()
	k, _ := key.NewPrivate()
	return connectAs(t, c, ctx, k)
}

func connectAs(t testing.TB, c signalpb.SignalExchangeClient, ctx context.Context, k key.Private) *peer {
	t.Helper()
	ctx = metadata.AppendToOutgoingContext(ctx, server.HeaderPeerID, k.Public().String())
	st, err := c.ConnectStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The registered header must come before any message.
	hctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	hdr := make(chan metadata.MD, 1)
	go func() { h, _ := st.Header(); hdr <- h }()
	select {
	case h := <-hdr:
		if len(h.Get(server.HeaderRegistered)) == 0 {
			t.Fatalf("no %s header", server.HeaderRegistered)
		}
	case <-hctx.Done():
		t.Fatal("registered header not sent before the first message")
	}
	return &peer{priv: k, st: st}
}

func sealed(t *testing.T, from, to key.Private, b *signalpb.Body) *signalpb.EncryptedMessage {
	t.Helper()
	raw, _ := proto.Marshal(b)
	body, err := envelope.Seal(raw, to.Public(), from)
	if err != nil {
		t.Fatal(err)
	}
	return &signalpb.EncryptedMessage{Key: from.Public().String(), RemoteKey: to.Public().String(), Body: body}
}

func recvWithin(t testing.TB, st grpc.BidiStreamingClient[signalpb.EncryptedMessage, signalpb.EncryptedMessage], d time.Duration) *signalpb.EncryptedMessage {
	t.Helper()
	ch := make(chan *signalpb.EncryptedMessage, 1)
	errc := make(chan error, 1)
	go func() {
		m, err := st.Recv()
		if err != nil {
			errc <- err
			return
		}
		ch <- m
	}()
	select {
	case m := <-ch:
		return m
	case err := <-errc:
		t.Fatalf("recv: %v", err)
	case <-time.After(d):
		t.Fatal("nothing received")
	}
	return nil
}

func TestRelaysSealedMessagesUnchanged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, c := start(t, server.Options{})
	a, b := connect(t, c, ctx), connect(t, c, ctx)
	sid := []byte{1, 2, 3, 4, 5}
	offer := &signalpb.Body{Type: signalpb.Body_OFFER, Payload: "ufrag:pwd", WgListenPort: 51820, SessionId: sid, RosenpassConfig: &signalpb.RosenpassConfig{}}
	msg := sealed(t, a.priv, b.priv, offer)
	if _, err := c.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	got := recvWithin(t, b.st, 2*time.Second)
	if !proto.Equal(got, msg) {
		t.Fatalf("message changed in transit:\n got %v\nwant %v", got, msg)
	}
	plain, err := envelope.Open(got.GetBody(), a.priv.Public(), b.priv)
	if err != nil {
		t.Fatal(err)
	}
	var body signalpb.Body
	if err := proto.Unmarshal(plain, &body); err != nil || body.GetPayload() != "ufrag:pwd" {
		t.Fatalf("receiver decode: %v %v", err, &body)
	}
	// Nobody but the receiver can read it: not the operator (who holds no
	// peer key), not a third peer.
	eve, _ := key.NewPrivate()
	if _, err := envelope.Open(got.GetBody(), a.priv.Public(), eve); err == nil {
		t.Fatal("a third party opened the message")
	}
	if bytes.Contains(got.GetBody(), []byte("ufrag:pwd")) {
		t.Fatal("payload visible in transit")
	}
	// Reply via the stream itself (SendToStream) also routes.
	if err := b.st.Send(sealed(t, b.priv, a.priv, &signalpb.Body{Type: signalpb.Body_ANSWER, Payload: "x:y"})); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, a.st, 2*time.Second); m.GetKey() != b.priv.Public().String() {
		t.Fatalf("answer from %s", m.GetKey())
	}
	if fw, _ := srv.Stats(); fw != 2 {
		t.Fatalf("forwarded %d", fw)
	}
}

func TestHeartbeatLoopsBackAndAbsentDropped(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	srv, c := start(t, server.Options{})
	a := connect(t, c, ctx)
	hb := sealed(t, a.priv, a.priv, &signalpb.Body{Type: signalpb.Body_HEARTBEAT})
	if _, err := c.Send(ctx, hb); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, a.st, 2*time.Second); !proto.Equal(m, hb) {
		t.Fatal("heartbeat not looped back unchanged")
	}
	ghost, _ := key.NewPrivate()
	if _, err := c.Send(ctx, sealed(t, a.priv, ghost, &signalpb.Body{Type: signalpb.Body_OFFER})); err != nil {
		t.Fatalf("send to absent peer must succeed silently, got %v", err)
	}
	if _, dropped := srv.Stats(); dropped != 1 {
		t.Fatalf("dropped %d", dropped)
	}
	if _, err := c.Send(ctx, &signalpb.EncryptedMessage{Key: a.priv.Public().String()}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("missing remoteKey: %v", err)
	}
}

func TestRegistrationRules(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, c := start(t, server.Options{})
	st, err := c.ConnectStream(ctx)
	if err == nil {
		_, err = st.Recv()
	}
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("missing header: %v", err)
	}
	bad, err := c.ConnectStream(metadata.AppendToOutgoingContext(ctx, server.HeaderPeerID, "nonsense"))
	if err == nil {
		_, err = bad.Recv()
	}
	if status.Code(err) != codes.InvalidArgument {
		t.Fatalf("bad id: %v", err)
	}
	// Newest stream wins.
	k, _ := key.NewPrivate()
	old := connectAs(t, c, ctx, k)
	newer := connectAs(t, c, ctx, k)
	if _, err := old.st.Recv(); status.Code(err) != codes.Aborted {
		t.Fatalf("old stream: %v, want Aborted", err)
	}
	other := connect(t, c, ctx)
	msg := sealed(t, other.priv, k, &signalpb.Body{Type: signalpb.Body_CANDIDATE, Payload: "c"})
	if _, err := c.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, newer.st, 2*time.Second); !proto.Equal(m, msg) {
		t.Fatal("newest stream did not get the message")
	}
	// A stream cannot speak for another key.
	forged := sealed(t, other.priv, other.priv, &signalpb.Body{Type: signalpb.Body_HEARTBEAT})
	if err := newer.st.Send(forged); err != nil {
		t.Fatal(err)
	}
	probe := sealed(t, other.priv, other.priv, &signalpb.Body{Type: signalpb.Body_HEARTBEAT, Payload: "probe"})
	if _, err := c.Send(ctx, probe); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, other.st, 2*time.Second); !proto.Equal(m, probe) {
		t.Fatal("forged message was delivered")
	}
}

// A peer that never reads must not hold up delivery to anyone else.
func TestStuckPeerDoesNotBlockOthers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, c := start(t, server.Options{Queue: 4, SendTimeout: 200 * time.Millisecond})
	stuck, live, sender := connect(t, c, ctx), connect(t, c, ctx), connect(t, c, ctx)
	payload := bytes.Repeat([]byte{'x'}, 512*1024) // fill the HTTP/2 window quickly
	for i := 0; i < 30; i++ {
		m := &signalpb.EncryptedMessage{Key: sender.priv.Public().String(), RemoteKey: stuck.priv.Public().String(), Body: payload}
		if _, err := c.Send(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	msg := sealed(t, sender.priv, live.priv, &signalpb.Body{Type: signalpb.Body_OFFER})
	if _, err := c.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	if m := recvWithin(t, live.st, 2*time.Second); !proto.Equal(m, msg) {
		t.Fatal("live peer missed its message")
	}
	t.Logf("delivery to a live peer beside a stuck one took %v", time.Since(start))
}
