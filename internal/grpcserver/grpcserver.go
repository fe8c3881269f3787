// Package grpcserver builds the gRPC server every binary shares (keepalive
// tuned for NetBird clients, message limits) and serves it beside plain
// HTTP/1.1 on one TCP port: connections that open with the HTTP/2 preface
// (gRPC over h2c, what `http://` management URLs mean) go to gRPC, the rest
// to an http.Handler (REST and dashboard). TLS termination is not done here.
package grpcserver

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// MaxMessage is the largest request we accept. The biggest legitimate
// client message (LoginRequest with full metadata) is a few kilobytes.
const MaxMessage = 1 << 20

// New returns a gRPC server whose keepalive policy admits the clients' 30 s
// pings (the grpc-go default of 5 min would GOAWAY them with too_many_pings).
func New(opts ...grpc.ServerOption) *grpc.Server {
	base := []grpc.ServerOption{
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 20 * time.Second, Timeout: 10 * time.Second}),
		grpc.MaxRecvMsgSize(MaxMessage),
		encodedCodec(), // proto, plus Encoded responses (encoded.go)
	}
	base = append(base, headersFirst()...) // status.go
	return grpc.NewServer(append(base, opts...)...)
}

var preface = []byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")

// Timeouts for the plain HTTP side of Serve.
const (
	// DefaultHeaderTimeout bounds reading a request's headers.
	DefaultHeaderTimeout = 10 * time.Second
	// DefaultBodyTimeout bounds reading a request's body (REST, OAuth
	// forms). WebSocket upgrades (the relay) are exempt: they live long.
	DefaultBodyTimeout = 30 * time.Second
	// DefaultIdleTimeout closes keep-alive connections idle this long.
	DefaultIdleTimeout = 2 * time.Minute
)

// Config tunes ServeConfig; zero fields take the defaults above.
type Config struct {
	Grace         time.Duration
	HeaderTimeout time.Duration
	BodyTimeout   time.Duration
	IdleTimeout   time.Duration
}

// Serve accepts on ln until ctx ends, then stops both servers gracefully
// (bounded by grace) and returns. Plain HTTP requests have header, body
// and idle timeouts; gRPC streams and WebSocket upgrades are long-lived and
// have none beyond keepalive. Wrap ln with Limit to cap connections.
func Serve(ctx context.Context, ln net.Listener, g *grpc.Server, h http.Handler, log *slog.Logger, grace time.Duration) error {
	return ServeConfig(ctx, ln, g, h, log, Config{Grace: grace})
}

// ServeConfig is Serve with every timeout settable.
func ServeConfig(ctx context.Context, ln net.Listener, g *grpc.Server, h http.Handler, log *slog.Logger, c Config) error {
	grace := c.Grace
	if grace <= 0 {
		grace = 5 * time.Second
	}
	if c.HeaderTimeout <= 0 {
		c.HeaderTimeout = DefaultHeaderTimeout
	}
	if c.BodyTimeout <= 0 {
		c.BodyTimeout = DefaultBodyTimeout
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
	}
	grpcLn := newChanListener(ln.Addr())
	httpLn := newChanListener(ln.Addr())
	hs := &http.Server{Handler: bodyDeadline(h, c.BodyTimeout), ReadHeaderTimeout: c.HeaderTimeout, IdleTimeout: c.IdleTimeout}
	var wg sync.WaitGroup
	errc := make(chan error, 3)
	wg.Add(3)
	go func() { defer wg.Done(); errc <- g.Serve(grpcLn) }()
	go func() {
		defer wg.Done()
		if err := hs.Serve(httpLn); !errors.Is(err, http.ErrServerClosed) {
			errc <- err
		}
	}()
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				grpcLn.Close()
				httpLn.Close()
				if ctx.Err() == nil {
					errc <- err
				}
				return
			}
			go dispatch(c, grpcLn, httpLn)
		}
	}()
	var err error
	select {
	case <-ctx.Done():
	case err = <-errc:
	}
	ln.Close()
	stopped := make(chan struct{})
	go func() { g.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(grace):
		log.Warn("grpc graceful stop timed out; forcing")
		g.Stop()
	}
	sctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	_ = hs.Shutdown(sctx)
	wg.Wait()
	return err
}

// bodyDeadline gives each plain HTTP request with a body d to deliver it,
// so a client trickling (or never sending) a body does not hold a
// connection. The deadline is lifted once the body is read, so a slow
// handler is not cut off. WebSocket upgrades are left alone: the deadline
// would outlive the hijack and cut the relay's long-lived connections.
func bodyDeadline(h http.Handler, d time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if isUpgrade(r) || r.Body == nil || r.Body == http.NoBody {
			h.ServeHTTP(w, r)
			return
		}
		rc := http.NewResponseController(w)
		if rc.SetReadDeadline(time.Now().Add(d)) == nil {
			r.Body = &deadlineBody{ReadCloser: r.Body, lift: func() { _ = rc.SetReadDeadline(time.Time{}) }}
		}
		h.ServeHTTP(w, r)
	})
}

// deadlineBody lifts the read deadline when the body has been read to
// its end.
type deadlineBody struct {
	io.ReadCloser
	lift func()
	once sync.Once
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.once.Do(b.lift)
	}
	return n, err
}

func isUpgrade(r *http.Request) bool {
	return r.Header.Get("Upgrade") != "" && headerHasToken(r.Header.Values("Connection"), "upgrade")
}

// headerHasToken reports whether a comma-separated header lists token.
func headerHasToken(values []string, token string) bool {
	for _, v := range values {
		for _, t := range strings.Split(v, ",") {
			if strings.EqualFold(strings.TrimSpace(t), token) {
				return true
			}
		}
	}
	return false
}

func dispatch(c net.Conn, grpcLn, httpLn *chanListener) {
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(c, len(preface))
	// Peek one byte first: only a 'P' can start the preface, and waiting for
	// 24 bytes could stall a short HTTP/1.1 request.
	first, err := br.Peek(1)
	if err != nil {
		c.Close()
		return
	}
	pc := &peekedConn{Conn: c, r: br}
	if first[0] == preface[0] {
		head, err := br.Peek(len(preface))
		_ = c.SetReadDeadline(time.Time{})
		if err == nil && bytes.Equal(head, preface) {
			grpcLn.deliver(pc)
			return
		}
	}
	_ = c.SetReadDeadline(time.Time{})
	httpLn.deliver(pc)
}

type peekedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *peekedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// chanListener is a net.Listener fed by the dispatcher.
type chanListener struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	closer sync.Once
}

func newChanListener(a net.Addr) *chanListener {
	return &chanListener{addr: a, conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) deliver(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.done:
		c.Close()
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.closer.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return l.addr }
