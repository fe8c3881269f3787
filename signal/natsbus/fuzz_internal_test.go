package natsbus

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/signalpb"
	"github.com/wiremesh/wiremesh/signal/server"
)

// localBus is a Bus's decoding half without a NATS connection: the signal
// server subscribes through it, and the fuzzer feeds handle() directly
// what NATS would deliver.
type localBus struct{ b *Bus }

func (l localBus) Publish(*signalpb.EncryptedMessage) error { return nil }
func (l localBus) Claim(string, server.Claim) error         { return nil }
func (l localBus) Subscribe(peer string, h server.BusHandler) (func(), error) {
	tok, err := token(peer)
	if err != nil {
		return nil, err
	}
	l.b.mu.Lock()
	l.b.handlers[tok] = &handler{h: h}
	l.b.mu.Unlock()
	return func() {
		l.b.mu.Lock()
		delete(l.b.handlers, tok)
		l.b.mu.Unlock()
	}, nil
}

// FuzzBusDecode feeds arbitrary subjects and payloads, as another instance
// (or anyone on the NATS server) could publish them, through the bus
// decoder into a real signal server holding one peer's stream: nothing
// panics, a message reaches the peer only when it is addressed to it, and
// the server keeps delivering.
func FuzzBusDecode(f *testing.F) {
	log := slog.New(slog.DiscardHandler)
	b := &Bus{log: log, handlers: map[string]*handler{}}
	s := server.New(server.Options{Log: log, Bus: localBus{b}})
	g := grpcserver.New()
	s.Register(g)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = grpcserver.Serve(ctx, ln, g, http.NotFoundHandler(), log, time.Second) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { conn.Close(); s.Close(); cancel(); <-done })
	pk, _ := key.NewPrivate()
	peer := pk.Public().String()
	st, err := signalpb.NewSignalExchangeClient(conn).ConnectStream(metadata.AppendToOutgoingContext(ctx, server.HeaderPeerID, peer))
	if err != nil {
		f.Fatal(err)
	}
	if _, err := st.Header(); err != nil {
		f.Fatal(err)
	}
	got := make(chan *signalpb.EncryptedMessage, 64)
	go func() {
		for {
			m, err := st.Recv()
			if err != nil {
				close(got)
				return
			}
			got <- m
		}
	}()
	tok, _ := token(peer)
	msg, _ := proto.Marshal(&signalpb.EncryptedMessage{Key: peer, RemoteKey: peer, Body: []byte{1}})
	f.Add(msgSubject(tok), msg)
	f.Add(claimSubject(tok), server.Claim{At: 1, Nonce: 2}.Bytes())
	f.Add(claimSubject(tok), []byte{1, 2, 3})
	f.Add(Prefix+"m.", []byte{0x1a, 0xff})
	f.Add(Prefix+"x."+tok, msg)
	probeN := 0
	f.Fuzz(func(t *testing.T, subject string, data []byte) {
		if c, ok := server.ParseClaim(data); ok && c.At > 1 {
			// A newer claim rightly ends the stream (the peer moved);
			// keep the fuzzed claims old so the stream stays for the check.
			c.At = 1
			data = c.Bytes()
		}
		b.handle(&nats.Msg{Subject: subject, Data: data})
		// A well-formed message to the peer, after the fuzzed one, must
		// arrive; anything before it must have been addressed to the peer.
		probeN++
		probe := &signalpb.EncryptedMessage{Key: peer, RemoteKey: peer, Body: []byte{byte(probeN), byte(probeN >> 8), 0xee}}
		raw, _ := proto.Marshal(probe)
		b.handle(&nats.Msg{Subject: msgSubject(tok), Data: raw})
		timeout := time.After(3 * time.Second)
		for {
			select {
			case m, ok := <-got:
				if !ok {
					t.Fatal("stream ended")
				}
				if proto.Equal(m, probe) {
					return
				}
				if m.GetRemoteKey() != peer {
					t.Fatalf("delivered a message for %q to %q", m.GetRemoteKey(), peer)
				}
			case <-timeout:
				t.Fatal("the peer stopped receiving")
			}
		}
	})
}
