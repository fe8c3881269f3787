package server_test

import (
	"context"
	"testing"
	"time"

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
