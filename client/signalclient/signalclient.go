// Package signalclient connects the agent to a signal server: it keeps a
// ConnectStream open (reconnecting with backoff, and probing it with
// self-addressed heartbeats), seals outgoing bodies for their recipient and
// opens incoming ones. It does not interpret offers or candidates.
package signalclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/sockmark"
	"github.com/wiremesh/wiremesh/proto/signalpb"
)

// Message is a received, opened body.
type Message struct {
	From key.Public
	Body *signalpb.Body
}

// Client is a signal connection.
type Client struct {
	priv key.Private
	pub  key.Public
	conn *grpc.ClientConn
	api  signalpb.SignalExchangeClient
	log  *slog.Logger
	Addr string

	mu     sync.Mutex
	shared map[key.Public]*envelope.Shared

	connected atomic.Bool
	lastErr   atomic.Value // string
}

// Dial prepares a client for addr (host:port); the stream opens in Run.
func Dial(addr string, useTLS bool, priv key.Private, log *slog.Logger) (*Client, error) {
	creds := insecure.NewCredentials()
	if useTLS {
		creds = credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	}
	// passthrough: the marked dialer resolves the name itself, over marked
	// sockets (see client/mgmtclient).
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(creds),
		// No service config from DNS TXT records: the lookup only costs time
		// (seconds where the resolver is slow or unreachable) and the
		// servers publish none.
		grpc.WithDisableServiceConfig(),
		// Marked sockets stay outside the tunnel whatever routes cover
		// the server (client/routes).
		grpc.WithContextDialer(sockmark.DialContext),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}))
	if err != nil {
		return nil, fmt.Errorf("signal %s: %w", addr, err)
	}
	return &Client{priv: priv, pub: priv.Public(), conn: conn, api: signalpb.NewSignalExchangeClient(conn), log: log, Addr: addr, shared: map[key.Public]*envelope.Shared{}}, nil
}

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Connected reports whether the stream is registered.
func (c *Client) Connected() bool { return c.connected.Load() }

// LastError is the latest connection error, if any.
func (c *Client) LastError() string {
	s, _ := c.lastErr.Load().(string)
	return s
}

func (c *Client) sharedWith(k key.Public) *envelope.Shared {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := c.shared[k]
	if s == nil {
		s = envelope.NewShared(c.priv, k)
		c.shared[k] = s
	}
	return s
}

// Send seals body for to and sends it, retrying briefly on failure.
func (c *Client) Send(ctx context.Context, to key.Public, body *signalpb.Body) error {
	raw, err := proto.Marshal(body)
	if err != nil {
		return err
	}
	sealed, err := c.sharedWith(to).Seal(raw)
	if err != nil {
		return err
	}
	msg := &signalpb.EncryptedMessage{Key: c.pub.String(), RemoteKey: to.String(), Body: sealed}
	var last error
	for attempt := 0; attempt < 3; attempt++ {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		_, err := c.api.Send(sctx, msg)
		cancel()
		if err == nil {
			return nil
		}
		last = err
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("signal send: %w", last)
}

// Run keeps the stream open until ctx ends, handing every message from a
// peer to handle (in order, on this goroutine). Messages that do not open
// are dropped.
func (c *Client) Run(ctx context.Context, handle func(Message)) {
	backoff := 500 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := c.stream(ctx, handle)
		c.connected.Store(false)
		if ctx.Err() != nil {
			return
		}
		c.lastErr.Store(err.Error())
		c.log.Warn("signal stream ended, reconnecting", "err", err, "in", backoff)
		if time.Since(start) > 30*time.Second {
			backoff = 500 * time.Millisecond
		}
		// Jitter spreads many agents' reconnects; ~3 s at most between
		// attempts, so peers meet again within seconds of signal's return.
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)))):
		}
		// gRPC keeps its own, longer backoff for a refused connection.
		c.conn.ResetConnectBackoff()
		backoff = min(backoff*2, 3*time.Second)
	}
}

var errStale = errors.New("signal stream stalled (heartbeat not returned)")

func (c *Client) stream(ctx context.Context, handle func(Message)) error {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := c.api.ConnectStream(metadata.AppendToOutgoingContext(sctx, "x-wiretrustee-peer-id", c.pub.String()))
	if err != nil {
		return err
	}
	md, err := st.Header()
	if err != nil {
		return err
	}
	if len(md.Get("x-wiretrustee-peer-registered")) == 0 {
		// A refusal arrives as headers then the status (servers that
		// avoid Trailers-Only for proxies' sake): the status says why.
		if _, rerr := st.Recv(); rerr != nil && !errors.Is(rerr, io.EOF) {
			return fmt.Errorf("signal server did not confirm registration: %w", rerr)
		}
		return errors.New("signal server did not confirm registration")
	}
	c.connected.Store(true)
	c.lastErr.Store("")
	// Watchdog: a quiet stream is probed with a heartbeat to ourselves; if
	// it does not come back, the stream is dead and we reconnect.
	var lastRecv atomic.Int64
	lastRecv.Store(time.Now().UnixNano())
	stale := make(chan struct{})
	go func() {
		t := time.NewTicker(10 * time.Second)
		defer t.Stop()
		probed := time.Time{}
		for {
			select {
			case <-sctx.Done():
				return
			case <-t.C:
			}
			quiet := time.Since(time.Unix(0, lastRecv.Load()))
			switch {
			case !probed.IsZero() && time.Unix(0, lastRecv.Load()).After(probed):
				probed = time.Time{}
			case !probed.IsZero() && time.Since(probed) > 10*time.Second:
				close(stale)
				cancel()
				return
			case probed.IsZero() && quiet > 30*time.Second:
				probed = time.Now()
				_ = c.Send(sctx, c.pub, &signalpb.Body{Type: signalpb.Body_HEARTBEAT})
			}
		}
	}()
	for {
		m, err := st.Recv()
		if err != nil {
			select {
			case <-stale:
				return errStale
			default:
			}
			return err
		}
		lastRecv.Store(time.Now().UnixNano())
		from, err := key.ParsePublic(m.GetKey())
		if err != nil {
			continue
		}
		raw, err := c.sharedWith(from).Open(m.GetBody())
		if err != nil {
			c.log.Debug("dropping signal message that does not open", "from", m.GetKey())
			continue
		}
		var body signalpb.Body
		if err := proto.Unmarshal(raw, &body); err != nil {
			continue
		}
		if body.GetType() == signalpb.Body_HEARTBEAT && from == c.pub {
			continue
		}
		handle(Message{From: from, Body: &body})
	}
}
