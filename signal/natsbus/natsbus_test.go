package natsbus_test

import (
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

	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/testnats"
	"github.com/wiremesh/wiremesh/proto/signalpb"
	"github.com/wiremesh/wiremesh/signal/natsbus"
	"github.com/wiremesh/wiremesh/signal/server"
)

type instance struct {
	srv *server.Server
	c   signalpb.SignalExchangeClient
	bus *natsbus.Bus
}

// startInstance runs one signal server joined to the NATS at url.
func startInstance(t *testing.T, url string) *instance {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	bus, err := natsbus.Dial(url, t.Name(), log)
	if err != nil {
		t.Fatal(err)
	}
	s := server.New(server.Options{Log: log, Bus: bus})
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
		_ = grpcserver.Serve(ctx, ln, g, http.NotFoundHandler(), log, time.Second)
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); s.Close(); cancel(); <-done; bus.Close() })
	return &instance{srv: s, c: signalpb.NewSignalExchangeClient(conn), bus: bus}
}

type stream = grpc.BidiStreamingClient[signalpb.EncryptedMessage, signalpb.EncryptedMessage]

func connect(t *testing.T, ctx context.Context, in *instance, k key.Private) stream {
	t.Helper()
	ctx = metadata.AppendToOutgoingContext(ctx, server.HeaderPeerID, k.Public().String())
	st, err := in.c.ConnectStream(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Header(); err != nil {
		t.Fatal(err)
	}
	return st
}

type result struct {
	m   *signalpb.EncryptedMessage
	err error
}

func recv(st stream) <-chan result {
	ch := make(chan result, 1)
	go func() {
		m, err := st.Recv()
		ch <- result{m, err}
	}()
	return ch
}

func want(t *testing.T, ch <-chan result, msg *signalpb.EncryptedMessage) {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("recv: %v", r.err)
		}
		if !proto.Equal(r.m, msg) {
			t.Fatalf("message changed between instances:\n got %v\nwant %v", r.m, msg)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("message did not cross instances")
	}
}

func msg(from, to key.Private, body string) *signalpb.EncryptedMessage {
	return &signalpb.EncryptedMessage{Key: from.Public().String(), RemoteKey: to.Public().String(), Body: []byte(body)}
}

// Peers on different instances reach each other through NATS, both by
// unary Send and on their streams, and a peer that connects again on
// another instance ends its older stream there.
func TestAcrossInstances(t *testing.T) {
	_, url := testnats.Start(t)
	s1, s2 := startInstance(t, url), startInstance(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, _ := key.NewPrivate()
	b, _ := key.NewPrivate()
	sa := connect(t, ctx, s1, a)
	sb := connect(t, ctx, s2, b)

	m := msg(a, b, "offer")
	inB := recv(sb)
	if _, err := s1.c.Send(ctx, m); err != nil {
		t.Fatal(err)
	}
	want(t, inB, m)
	r := msg(b, a, "answer")
	inA := recv(sa)
	if err := sb.Send(r); err != nil {
		t.Fatal(err)
	}
	want(t, inA, r)
	if _, dropped := s1.srv.Stats(); dropped != 0 {
		t.Fatalf("s1 dropped %d", dropped)
	}

	// a moves to s2: its stream on s1 ends, and messages from b (now on
	// the same instance) reach the new stream.
	sa2 := connect(t, ctx, s2, a)
	select {
	case res := <-recv(sa):
		if status.Code(res.err) != codes.Aborted {
			t.Fatalf("old stream on s1: %v %v", res.m, res.err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("old stream on the other instance not ended")
	}
	if s1.srv.Connected(a.Public().String()) {
		t.Fatal("s1 still holds a")
	}
	// c, on s1, reaches a through s1, which no longer has a.
	c, _ := key.NewPrivate()
	_ = connect(t, ctx, s1, c)
	m2 := msg(c, a, "again")
	in2 := recv(sa2)
	if _, err := s1.c.Send(ctx, m2); err != nil {
		t.Fatal(err)
	}
	want(t, in2, m2)
}

// A stream that announces itself later but was opened earlier (its claim
// is older) does not displace the newer one: it is told to end.
func TestOlderClaimLoses(t *testing.T) {
	_, url := testnats.Start(t)
	s1, s2 := startInstance(t, url), startInstance(t, url)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	a, _ := key.NewPrivate()
	sa := connect(t, ctx, s1, a)
	_ = sa
	// An instance (s2's bus, standing in for a slow one) claims a with a
	// stamp from the past: s1's newer stream must survive and answer with
	// its own claim.
	got := make(chan server.Claim, 4)
	unsub, err := s2.bus.Subscribe(a.Public().String(), claims(got))
	if err != nil {
		t.Fatal(err)
	}
	defer unsub()
	old := server.Claim{At: time.Now().Add(-time.Minute).UnixNano(), Nonce: 1}
	if err := s2.bus.Claim(a.Public().String(), old); err != nil {
		t.Fatal(err)
	}
	deadline := time.After(3 * time.Second)
	for {
		select {
		case c := <-got:
			if c == old {
				continue
			}
			if !c.After(old) {
				t.Fatalf("answered with an older claim %v", c)
			}
			if !s1.srv.Connected(a.Public().String()) {
				t.Fatal("newer stream ended by an older claim")
			}
			return
		case <-deadline:
			t.Fatal("s1 did not answer the stale claim")
		}
	}
}

type claims chan server.Claim

func (claims) Message(*signalpb.EncryptedMessage) {}
func (c claims) Claimed(cl server.Claim)          { c <- cl }

// Keys that are not WireGuard keys never reach NATS subjects.
func TestBadKeyRefused(t *testing.T) {
	_, url := testnats.Start(t)
	in := startInstance(t, url)
	if err := in.bus.Publish(&signalpb.EncryptedMessage{RemoteKey: "a.b.>"}); err == nil {
		t.Fatal("subject characters accepted as a key")
	}
}
