package server

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/relaywire"
	"github.com/wiremesh/wiremesh/internal/testcert"
)

const secret = "test-relay-secret"

type lab struct {
	t   testing.TB
	srv *Server
	url string // rel://127.0.0.1:port
}

func newLab(t testing.TB, mod func(*Options)) *lab {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{InstanceURL: "rel://" + ln.Addr().String(), Secret: secret}
	if mod != nil {
		mod(&o)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(relayconn.Path, s)
	hs := &httptest.Server{Listener: ln, Config: &http.Server{Handler: mux}}
	hs.Start()
	t.Cleanup(func() { s.Close(); hs.Close() })
	return &lab{t: t, srv: s, url: o.InstanceURL}
}

func token(t testing.TB, sec string, exp time.Time) []byte {
	b, err := relaywire.Issue(sec, exp).Binary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// boundToken is what our management issues: a token for one peer ID.
func boundToken(t testing.TB, sec string, exp time.Time, id relaywire.PeerID) []byte {
	b, err := relaywire.IssueFor(sec, exp, id).Binary()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// client is a raw protocol client, shaped like the official one. A
// goroutine reads (a WebSocket read whose context ends closes the
// connection, so reads never carry a timeout).
type client struct {
	t   testing.TB
	c   relayconn.Conn
	id  relaywire.PeerID
	in  chan []byte
	err chan error
}

func newClient(t testing.TB, c relayconn.Conn, name string) *client {
	cl := &client{t: t, c: c, id: relaywire.HashID(name), in: make(chan []byte, 1024), err: make(chan error, 1)}
	go func() {
		for {
			m, err := c.ReadMessage(context.Background())
			if err != nil {
				cl.err <- err
				return
			}
			cl.in <- m
		}
	}()
	return cl
}

func (l *lab) dial(name string) *client {
	l.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := relayconn.DialWS(ctx, l.url, nil)
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { c.Close() })
	return newClient(l.t, c, name)
}

func (l *lab) connect(name string) *client {
	l.t.Helper()
	c := l.dial(name)
	c.send(relaywire.Auth(c.id, boundToken(l.t, secret, time.Now().Add(time.Hour), c.id)))
	url, err := relaywire.ParseAuthResponse(c.recv())
	if err != nil || url != l.url {
		l.t.Fatalf("auth response %q %v", url, err)
	}
	return c
}

func (c *client) send(m []byte) {
	c.t.Helper()
	if err := c.c.WriteMessage(context.Background(), m); err != nil {
		c.t.Fatal(err)
	}
}

var errTimeout = fmt.Errorf("timeout")

func (c *client) recvErr(d time.Duration) ([]byte, error) {
	// Messages read before the connection ended come first: a select over
	// both channels would pick at random when both are ready.
	select {
	case m := <-c.in:
		return m, nil
	default:
	}
	select {
	case m := <-c.in:
		return m, nil
	case err := <-c.err:
		select {
		case m := <-c.in:
			c.err <- err
			return m, nil
		default:
		}
		c.err <- err
		return nil, err
	case <-time.After(d):
		return nil, errTimeout
	}
}

// recv returns the next message other than a health check.
func (c *client) recv() []byte {
	c.t.Helper()
	for {
		m, err := c.recvErr(5 * time.Second)
		if err != nil {
			c.t.Fatalf("recv: %v", err)
		}
		if typ, _ := relaywire.Header(m); typ != relaywire.TypeHealthCheck {
			return m
		}
		c.send(m)
	}
}

func (c *client) expectList(t relaywire.Type, ids ...relaywire.PeerID) {
	c.t.Helper()
	m := c.recv()
	want := relaywire.PeerList(t, ids)[0]
	if !bytes.Equal(m, want) {
		c.t.Fatalf("got %x, want %s %x", m, t, want)
	}
}

// expectClosed checks the server closed the connection without a reply.
func (c *client) expectClosed() {
	c.t.Helper()
	m, err := c.recvErr(3 * time.Second)
	if err == nil {
		c.t.Fatalf("expected a silent close, got %x", m)
	}
	if err == errTimeout {
		c.t.Fatalf("connection still open after 3 s")
	}
}

func TestAuthRefusals(t *testing.T) {
	l := newLab(t, nil)
	for name, msg := range map[string][]byte{
		"expired":      relaywire.Auth(relaywire.HashID("a"), token(t, secret, time.Now().Add(-time.Minute))),
		"forged":       relaywire.Auth(relaywire.HashID("a"), token(t, "wrong-secret", time.Now().Add(time.Hour))),
		"empty token":  relaywire.Auth(relaywire.HashID("a"), nil),
		"not auth":     relaywire.Transport(relaywire.HashID("b"), []byte("x")),
		"legacy hello": {1, 1, 0x21, 0x12, 0xa4, 0x42},
		"version 2":    append([]byte{2}, relaywire.Auth(relaywire.HashID("a"), boundToken(t, secret, time.Now().Add(time.Hour), relaywire.HashID("a")))[1:]...),
		"oversized":    relaywire.Auth(relaywire.HashID("a"), append(boundToken(t, secret, time.Now().Add(time.Hour), relaywire.HashID("a")), make([]byte, 300)...)),
	} {
		t.Run(name, func(t *testing.T) {
			c := l.dial("a")
			c.send(msg)
			c.expectClosed()
		})
	}
	t.Run("text frame", func(t *testing.T) {
		ctx := context.Background()
		ws, _, err := websocket.Dial(ctx, strings.Replace(l.url, "rel://", "ws://", 1)+relayconn.Path, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer ws.CloseNow()
		_ = ws.Write(ctx, websocket.MessageText, []byte("hello"))
		rctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		defer cancel()
		if _, m, err := ws.Read(rctx); err == nil || rctx.Err() != nil {
			t.Fatalf("text frame answered %x %v", m, err)
		}
	})
	if st := l.srv.Stats(); st.Peers != 0 {
		t.Fatalf("refused peers stored: %+v", st)
	}
}

func TestTwoPeersAndPresence(t *testing.T) {
	l := newLab(t, nil)
	a, b := l.connect("peer-a"), l.connect("peer-b")
	// Subscribing to a peer already online is answered at once.
	a.send(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{b.id})[0])
	a.expectList(relaywire.TypePeersOnline, b.id)
	b.send(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{a.id})[0])
	b.expectList(relaywire.TypePeersOnline, a.id)

	payload := bytes.Repeat([]byte{0xab}, 1312)
	a.send(relaywire.Transport(b.id, payload))
	src, got, err := relaywire.ParseTransport(b.recv())
	if err != nil || src != a.id || !bytes.Equal(got, payload) {
		t.Fatalf("b got from %s %d bytes %v", src, len(got), err)
	}
	b.send(relaywire.Transport(a.id, []byte("pong")))
	if src, got, _ := relaywire.ParseTransport(a.recv()); src != b.id || string(got) != "pong" {
		t.Fatalf("a got %q from %s", got, src)
	}
	// A transport for a peer that is not here is dropped silently.
	a.send(relaywire.Transport(relaywire.HashID("nobody"), []byte("x")))

	// Subscribing to an absent peer: no reply now, a one-shot online later.
	cID := relaywire.HashID("peer-c")
	a.send(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{cID})[0])
	if m, err := a.recvErr(300 * time.Millisecond); err == nil {
		t.Fatalf("subscribe to an absent peer answered %x", m)
	}
	c := l.connect("peer-c")
	a.expectList(relaywire.TypePeersOnline, cID)
	// C leaves gracefully: A hears it went offline.
	c.send(relaywire.Simple(relaywire.TypeClose))
	a.expectList(relaywire.TypePeersOff, cID)
	// B drops abruptly: A hears that too.
	b.c.Close()
	a.expectList(relaywire.TypePeersOff, b.id)
	// After unsubscribing, A hears nothing of C's return.
	a.send(relaywire.PeerList(relaywire.TypeUnsubscribe, []relaywire.PeerID{cID})[0])
	time.Sleep(100 * time.Millisecond)
	l.connect("peer-c")
	if m, err := a.recvErr(300 * time.Millisecond); err == nil {
		t.Fatalf("unsubscribed notice %x", m)
	}
}

func TestNewestConnectionWins(t *testing.T) {
	l := newLab(t, nil)
	old := l.connect("same")
	other := l.connect("other")
	fresh := l.connect("same")
	old.expectClosed()
	other.send(relaywire.Transport(fresh.id, []byte("to the new one")))
	if _, got, _ := relaywire.ParseTransport(fresh.recv()); string(got) != "to the new one" {
		t.Fatalf("got %q", got)
	}
}

func TestHealthChecks(t *testing.T) {
	l := newLab(t, func(o *Options) { o.HealthInterval = 100 * time.Millisecond })
	silent := l.connect("silent")
	live := l.connect("live")
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		m, err := live.recvErr(200 * time.Millisecond)
		if err == nil {
			if typ, _ := relaywire.Header(m); typ == relaywire.TypeHealthCheck {
				live.send(m)
			}
		}
	}
	// The silent peer saw health checks but never echoed: it was dropped.
	for {
		m, err := silent.recvErr(time.Second)
		if err != nil {
			break
		}
		if typ, _ := relaywire.Header(m); typ != relaywire.TypeHealthCheck {
			t.Fatalf("unexpected %x", m)
		}
	}
	if st := l.srv.Stats(); st.Peers != 1 {
		t.Fatalf("peers after health checks: %+v (want only the live one)", st)
	}
}

func TestRateLimit(t *testing.T) {
	l := newLab(t, func(o *Options) { o.PeerRate, o.PeerBurst = 10000, 10000 })
	a, b := l.connect("a"), l.connect("b")
	for range 50 {
		a.send(relaywire.Transport(b.id, make([]byte, 1000)))
	}
	got := 0
	for {
		m, err := b.recvErr(300 * time.Millisecond)
		if err != nil {
			break
		}
		if typ, _ := relaywire.Header(m); typ == relaywire.TypeTransport {
			got++
		}
	}
	if got < 5 || got > 15 || l.srv.m.droppedLimited.Load() == 0 {
		t.Fatalf("%d of 50 1 kB messages through a 10 kB/s limit, %d dropped", got, l.srv.m.droppedLimited.Load())
	}
}

// TestNoGrowthAfterPeersLeave connects many subscribing peers, lets them
// go, and checks the server holds no state or goroutines for them.
func TestNoGrowthAfterPeersLeave(t *testing.T) {
	l := newLab(t, nil)
	base := runtime.NumGoroutine()
	anchor := l.connect("anchor")
	for round := range 3 {
		var cs []*client
		for i := range 50 {
			c := l.connect(fmt.Sprintf("p-%d-%d", round, i))
			c.send(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{anchor.id, relaywire.HashID("absent")})[0])
			c.expectList(relaywire.TypePeersOnline, anchor.id)
			cs = append(cs, c)
		}
		for i, c := range cs {
			if i%2 == 0 {
				c.send(relaywire.Simple(relaywire.TypeClose))
			} else {
				c.c.Close()
			}
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		st := l.srv.Stats()
		if st.Peers == 1 && st.OnlineWatches == 0 && st.OfflineWatches == 0 && runtime.NumGoroutine() <= base+8 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 150 peers left: %+v, goroutines %d (base %d)", st, runtime.NumGoroutine(), base)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestShutdownSendsClose(t *testing.T) {
	l := newLab(t, nil)
	a := l.connect("a")
	go l.srv.Close()
	if m := a.recv(); !bytes.Equal(m, relaywire.Simple(relaywire.TypeClose)) {
		t.Fatalf("got %x", m)
	}
}

func TestQUIC(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "rels://" + pc.LocalAddr().String()
	s, err := New(Options{InstanceURL: url, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	cert := testcert.New(t)
	tc, pool := &tls.Config{Certificates: []tls.Certificate{cert.TLS}}, cert.Pool
	ln, err := relayconn.ListenQUIC(pc, tc)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = s.ServeQUIC(ln) }()
	t.Cleanup(func() { s.Close(); ln.Close(); pc.Close() })
	dial := func(name string) relayconn.Conn {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		c, err := relayconn.DialQUIC(ctx, url, &tls.Config{RootCAs: pool, ServerName: "relay.test"})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.WriteMessage(ctx, relaywire.Auth(relaywire.HashID(name), boundToken(t, secret, time.Now().Add(time.Hour), relaywire.HashID(name)))); err != nil {
			t.Fatal(err)
		}
		m, err := c.ReadMessage(ctx)
		if got, err2 := relaywire.ParseAuthResponse(m); err != nil || err2 != nil || got != url {
			t.Fatalf("QUIC auth response %q %v %v", got, err, err2)
		}
		return c
	}
	a, b := dial("qa"), dial("qb")
	defer a.Close()
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.WriteMessage(ctx, relaywire.Transport(relaywire.HashID("qb"), []byte("over quic")))
	m, err := b.ReadMessage(ctx)
	if src, p, _ := relaywire.ParseTransport(m); err != nil || src != relaywire.HashID("qa") || string(p) != "over quic" {
		t.Fatalf("QUIC transport %x %v", m, err)
	}
}
