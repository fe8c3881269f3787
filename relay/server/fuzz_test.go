package server

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/relaywire"
)

// frames splits fuzz input into messages: each is a length byte and that
// many bytes (the last one takes what is left).
func frames(data []byte) [][]byte {
	var out [][]byte
	for len(data) > 0 {
		n := min(int(data[0]), len(data)-1)
		out = append(out, data[1:1+n])
		data = data[1+n:]
	}
	return out
}

// FuzzSession drives the real server's session loop with arbitrary frames
// after a valid auth: it must never panic, and once the client is gone it
// must hold nothing for it (peers, subscriptions, queued bytes).
func FuzzSession(f *testing.F) {
	b := relaywire.HashID("fuzz-b")
	sub := relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{b, relaywire.HashID("x")})[0]
	join := func(ms ...[]byte) []byte {
		var out []byte
		for _, m := range ms {
			out = append(out, byte(len(m)))
			out = append(out, m...)
		}
		return out
	}
	f.Add(join(sub, relaywire.Transport(b, []byte("hi")), relaywire.Simple(relaywire.TypeHealthCheck)))
	f.Add(join(sub, relaywire.PeerList(relaywire.TypeUnsubscribe, []relaywire.PeerID{b})[0], sub[:20]))
	f.Add(join([]byte{1, 6, 0x21, 0x12, 0xa4, 0x42}, []byte{1}, []byte{}))
	f.Add(join(relaywire.Simple(relaywire.TypeClose), sub))
	// One server for every input (a server per input costs seconds of
	// setup and shutdown); each input is a new peer ID.
	l := newLab(f, nil)
	l.connect("fuzz-b")
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, data []byte) {
		lt := &lab{t: t, srv: l.srv, url: l.url}
		c := lt.connect(fmt.Sprint("fuzz-a-", n.Add(1)))
		for _, m := range frames(data) {
			if c.c.WriteMessage(t.Context(), m) != nil {
				break // the server closed the connection
			}
		}
		c.c.Close()
		deadline := time.Now().Add(10 * time.Second)
		for {
			st := l.srv.Stats()
			if st.Peers == 1 && st.Subscriptions == 0 && st.OnlineWatches == 0 && st.OfflineWatches == 0 && st.QueuedBytes == 0 && st.Handshakes == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("state left after the client went: %+v", st)
			}
			time.Sleep(time.Millisecond)
		}
	})
}
