package server_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/signalpb"
	"github.com/wiremesh/wiremesh/signal/server"
)

// FuzzSignalRelay sends arbitrary messages through signal: whatever they
// hold, the server keeps serving, and a message addressed to a connected
// peer reaches it exactly as sent (signal never reads or changes bodies).
func FuzzSignalRelay(f *testing.F) {
	_, c := start(f, server.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	rk, _ := key.NewPrivate()
	r := connectAs(f, c, ctx, rk)
	seed, _ := proto.Marshal(&signalpb.EncryptedMessage{Key: "sender", RemoteKey: "x", Body: []byte{1, 2, 3}})
	f.Add(seed, true)
	f.Add([]byte{0x0a, 0xff, 0xff}, false)
	f.Add([]byte{}, true)
	f.Fuzz(func(t *testing.T, raw []byte, toConnected bool) {
		var m signalpb.EncryptedMessage
		if proto.Unmarshal(raw, &m) != nil {
			return // a client cannot send what is not a message
		}
		if toConnected {
			m.RemoteKey = rk.Public().String()
		}
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		if _, err := c.Send(sctx, &m); err != nil {
			return // refused (e.g. no sender key): fine, it must just not break anything
		}
		if !toConnected {
			return
		}
		got := recvWithin(t, r.st, 2*time.Second)
		if !proto.Equal(got, &m) {
			t.Fatalf("relayed %v, sent %v", got, &m)
		}
	})
}

// FuzzSignalStream sends arbitrary bytes as messages on a ConnectStream
// whose peer-id header is itself fuzzed: whatever arrives, the server
// keeps serving, a message never reaches anyone under a key other than
// the stream's own, and one from the stream's key to a connected peer
// arrives unchanged.
func FuzzSignalStream(f *testing.F) {
	_, addr := startAt(f, server.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	f.Cleanup(cancel)
	c := dial(f, addr)
	rk, _ := key.NewPrivate()
	r := connectAs(f, c, ctx, rk)
	sk, _ := key.NewPrivate()
	seed, _ := proto.Marshal(&signalpb.EncryptedMessage{Key: sk.Public().String(), RemoteKey: rk.Public().String(), Body: []byte{1, 2, 3}})
	f.Add(sk.Public().String(), seed, true)
	f.Add("", seed, true)
	f.Add("not a key", []byte{0x12, 0x00}, false)
	f.Add(sk.Public().String(), []byte{0x1a, 0x2c}, true)
	var probes atomic.Uint64
	f.Fuzz(func(t *testing.T, id string, raw []byte, toConnected bool) {
		var m signalpb.EncryptedMessage
		if proto.Unmarshal(raw, &m) != nil {
			return // a client cannot send what is not a message
		}
		if toConnected {
			m.RemoteKey = rk.Public().String()
		}
		sctx, scancel := context.WithTimeout(ctx, 5*time.Second)
		defer scancel()
		st, err := c.ConnectStream(metadata.AppendToOutgoingContext(sctx, server.HeaderPeerID, id))
		if err != nil {
			return // the client refuses such a header: nothing reached the server
		}
		h, err := st.Header()
		if err != nil || len(h.Get(server.HeaderRegistered)) == 0 {
			// Refused (bad or missing id): fine. Errors leave as headers
			// then trailers (internal/grpcserver/status.go), so a refused
			// stream shows as headers without the registration key, the
			// check NetBird's signal client makes.
			return
		}
		if err := st.Send(&m); err != nil {
			return
		}
		// A probe on the same stream, which is routed in order, tells when
		// the fuzzed message would have arrived.
		probe := &signalpb.EncryptedMessage{RemoteKey: rk.Public().String(), Body: []byte(fmt.Sprintf("probe %d", probes.Add(1)))}
		if err := st.Send(probe); err != nil {
			t.Fatalf("probe: %v", err)
		}
		probe.Key = id
		for {
			got := recvWithin(t, r.st, 3*time.Second)
			if proto.Equal(got, probe) {
				return
			}
			if got.GetKey() != id {
				t.Fatalf("delivered under key %q from a stream registered as %q", got.GetKey(), id)
			}
			want := proto.Clone(&m).(*signalpb.EncryptedMessage)
			if want.Key == "" {
				want.Key = id
			}
			if !proto.Equal(got, want) {
				t.Fatalf("relayed %v, sent %v", got, want)
			}
		}
	})
}
