// Package relayclient is the agent's side of the NetBird relay: one
// authenticated connection per relay server, on which the agent opens
// packet connections to remote peers (net.Conn, one WireGuard datagram per
// Read and Write), and a manager that keeps the home relay connected and
// dials other peers' home relays when the pair rule asks for them.
package relayclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/relaywire"
)

// Timeouts of the protocol (SPEC-relay §6).
const (
	authTimeout   = 8 * time.Second
	openTimeout   = 30 * time.Second
	healthTimeout = 35 * time.Second
	// peerQueue is how many datagrams wait for WireGuard per remote peer;
	// beyond it they are dropped as a full socket would drop them.
	peerQueue = 1024
	earlyTTL  = 5 * time.Second
	maxEarly  = 10000
)

// ErrClosed is returned once the relay connection is gone.
var ErrClosed = errors.New("relay connection closed")

// Client is one authenticated relay connection.
type Client struct {
	url      string // what was dialed
	instance string // what the server calls itself
	id       relaywire.PeerID
	c        relayconn.Conn
	log      *slog.Logger

	done     chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup
	err      error

	mu      sync.Mutex
	conns   map[relaywire.PeerID]*PeerConn
	waiting map[relaywire.PeerID][]chan struct{}
	early   map[relaywire.PeerID]early
	health  chan struct{}
}

type early struct {
	msg []byte
	at  time.Time
}

// Dial connects to a relay URL and authenticates as the owner of pub with
// the management-issued token. tlsConf may be nil (system roots).
func Dial(ctx context.Context, url, pub string, cred relaywire.Credentials, tlsConf *tls.Config, log *slog.Logger) (*Client, error) {
	tok, err := cred.Binary()
	if err != nil {
		return nil, fmt.Errorf("relay %s: no usable token from management: %w", url, err)
	}
	c, err := dialTransport(ctx, url, tlsConf)
	if err != nil {
		return nil, err
	}
	id := relaywire.HashID(pub)
	wctx, cancel := context.WithTimeout(ctx, authTimeout)
	defer cancel()
	if err := c.WriteMessage(wctx, relaywire.Auth(id, tok)); err != nil {
		c.Close()
		return nil, fmt.Errorf("relay %s: send auth: %w", url, err)
	}
	// The server closes without a word when it refuses the token.
	type result struct {
		msg []byte
		err error
	}
	res := make(chan result, 1)
	go func() {
		m, err := c.ReadMessage(context.Background())
		res <- result{m, err}
	}()
	var r result
	select {
	case r = <-res:
	case <-wctx.Done():
		c.Close()
		<-res
		return nil, fmt.Errorf("relay %s: no auth response within %v", url, authTimeout)
	}
	if r.err != nil {
		c.Close()
		return nil, fmt.Errorf("relay %s refused the connection (expired or wrong token?): %w", url, r.err)
	}
	instance, err := relaywire.ParseAuthResponse(r.msg)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("relay %s: %w", url, err)
	}
	cl := &Client{url: url, instance: instance, id: id, c: c, log: log.With("relay", instance),
		done: make(chan struct{}), conns: map[relaywire.PeerID]*PeerConn{}, waiting: map[relaywire.PeerID][]chan struct{}{},
		early: map[relaywire.PeerID]early{}, health: make(chan struct{}, 1)}
	cl.wg.Add(2)
	go func() { defer cl.wg.Done(); cl.readLoop() }()
	go func() { defer cl.wg.Done(); cl.watchHealth() }()
	return cl, nil
}

// dialTransport connects over WebSocket (TLS for rels://). The agent does
// not use the QUIC transport: QUIC datagrams start at 1232 bytes, below a
// WireGuard datagram of a 1280-MTU tunnel plus the relay header, so the
// first full-size packets would fail until path MTU discovery raised the
// limit (the official client falls back to WebSocket after such a failure).
func dialTransport(ctx context.Context, url string, tlsConf *tls.Config) (relayconn.Conn, error) {
	return relayconn.DialWS(ctx, url, tlsConf)
}

// Transport is "ws" or "quic".
func (c *Client) Transport() string { return c.c.Transport() }

// InstanceURL is the relay's own name for itself: what offers advertise.
func (c *Client) InstanceURL() string { return c.instance }

// Done is closed when the connection ends.
func (c *Client) Done() <-chan struct{} { return c.done }

// Err says why the connection ended.
func (c *Client) Err() error {
	select {
	case <-c.done:
		return c.err
	default:
		return nil
	}
}

// Conns is how many peer connections are open.
func (c *Client) Conns() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.conns)
}

// Close says goodbye to the relay and ends the connection.
func (c *Client) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	_ = c.c.WriteMessage(ctx, relaywire.Simple(relaywire.TypeClose))
	cancel()
	c.fail(ErrClosed)
	c.wg.Wait()
}

func (c *Client) fail(err error) {
	c.stopOnce.Do(func() {
		c.err = err
		close(c.done)
		c.c.Close()
		c.mu.Lock()
		conns := c.conns
		c.conns = map[relaywire.PeerID]*PeerConn{}
		c.mu.Unlock()
		for _, pc := range conns {
			pc.closeLocal()
		}
	})
}

func (c *Client) write(msg []byte) error {
	select {
	case <-c.done:
		return ErrClosed
	default:
	}
	// No per-datagram context: a hung connection is caught by the health
	// watchdog (the server's checks stop arriving).
	if err := c.c.WriteMessage(context.Background(), msg); err != nil {
		c.fail(err)
		return err
	}
	return nil
}

func (c *Client) watchHealth() {
	t := time.NewTimer(healthTimeout)
	defer t.Stop()
	for {
		select {
		case <-c.done:
			return
		case <-c.health:
			t.Reset(healthTimeout)
		case <-t.C:
			c.log.Warn("relay sent no health check in time, reconnecting")
			c.fail(errors.New("relay health check timeout"))
			return
		}
	}
}

func (c *Client) readLoop() {
	for {
		msg, err := c.c.ReadMessage(context.Background())
		if err != nil {
			c.fail(err)
			return
		}
		t, err := relaywire.Header(msg)
		if err != nil {
			continue // dropped, as the reference client does
		}
		switch t {
		case relaywire.TypeTransport:
			src, _, err := relaywire.ParseTransport(msg)
			if err != nil {
				continue
			}
			c.mu.Lock()
			pc := c.conns[src]
			if pc == nil && len(c.early) < maxEarly {
				// The remote's first handshake can beat our OpenConn.
				c.early[src] = early{msg: msg, at: time.Now()}
			}
			c.mu.Unlock()
			if pc != nil {
				pc.deliver(msg)
			}
		case relaywire.TypeHealthCheck:
			select {
			case c.health <- struct{}{}:
			default:
			}
			_ = c.write(relaywire.Simple(relaywire.TypeHealthCheck))
		case relaywire.TypePeersOnline:
			ids, err := relaywire.ParsePeerList(msg)
			if err != nil {
				continue
			}
			c.mu.Lock()
			for _, id := range ids {
				for _, ch := range c.waiting[id] {
					close(ch)
				}
				delete(c.waiting, id)
			}
			c.mu.Unlock()
		case relaywire.TypePeersOff:
			ids, err := relaywire.ParsePeerList(msg)
			if err != nil {
				continue
			}
			for _, id := range ids {
				c.mu.Lock()
				pc := c.conns[id]
				delete(c.conns, id)
				c.mu.Unlock()
				if pc != nil {
					pc.closeLocal()
					_ = c.write(relaywire.PeerList(relaywire.TypeUnsubscribe, []relaywire.PeerID{id})[0])
				}
			}
		case relaywire.TypeClose:
			c.fail(errors.New("the relay closed the connection"))
			return
		}
	}
}

// ErrExists is returned when a connection to the peer is already open on
// this relay (callers reuse it).
var ErrExists = errors.New("relay connection to the peer already open")

// OpenConn opens a packet connection to the peer with public key pub. It
// waits until the peer is connected to this relay (up to 30 s).
func (c *Client) OpenConn(ctx context.Context, pub string) (*PeerConn, error) {
	id := relaywire.HashID(pub)
	c.mu.Lock()
	if c.conns[id] != nil {
		c.mu.Unlock()
		return nil, ErrExists
	}
	ch := make(chan struct{})
	c.waiting[id] = append(c.waiting[id], ch)
	c.mu.Unlock()
	if err := c.write(relaywire.PeerList(relaywire.TypeSubscribe, []relaywire.PeerID{id})[0]); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, openTimeout)
	defer cancel()
	select {
	case <-ch:
	case <-ctx.Done():
		c.mu.Lock()
		ws := c.waiting[id]
		for i, w := range ws {
			if w == ch {
				c.waiting[id] = append(ws[:i], ws[i+1:]...)
				break
			}
		}
		if len(c.waiting[id]) == 0 {
			delete(c.waiting, id)
		}
		c.mu.Unlock()
		_ = c.write(relaywire.PeerList(relaywire.TypeUnsubscribe, []relaywire.PeerID{id})[0])
		return nil, fmt.Errorf("peer not on relay %s: %w", c.instance, ctx.Err())
	case <-c.done:
		return nil, ErrClosed
	}
	pc := &PeerConn{c: c, id: id, in: make(chan []byte, peerQueue), closed: make(chan struct{})}
	c.mu.Lock()
	if c.conns[id] != nil {
		c.mu.Unlock()
		return nil, ErrExists
	}
	c.conns[id] = pc
	e, ok := c.early[id]
	delete(c.early, id)
	// Forget stale early messages of peers nobody opened.
	for k, v := range c.early {
		if time.Since(v.at) > earlyTTL {
			delete(c.early, k)
		}
	}
	c.mu.Unlock()
	if ok && time.Since(e.at) <= earlyTTL {
		pc.deliver(e.msg)
	}
	return pc, nil
}

// PeerConn is a packet connection to one peer through the relay.
type PeerConn struct {
	c         *Client
	id        relaywire.PeerID
	in        chan []byte
	closed    chan struct{}
	closeOnce sync.Once
}

var _ net.Conn = (*PeerConn)(nil)

func (p *PeerConn) deliver(msg []byte) {
	select {
	case p.in <- msg:
	case <-p.closed:
	default: // WireGuard is not keeping up: drop
	}
}

// Discard drops what arrived but was not read yet, and says how much.
func (p *PeerConn) Discard() int {
	n := 0
	for {
		select {
		case <-p.in:
			n++
		default:
			return n
		}
	}
}

func (p *PeerConn) closeLocal() { p.closeOnce.Do(func() { close(p.closed) }) }

// Read returns one datagram from the peer.
func (p *PeerConn) Read(b []byte) (int, error) {
	select {
	case m := <-p.in:
		return copy(b, m[relaywire.TransportHeader:]), nil
	case <-p.closed:
		return 0, net.ErrClosed
	}
}

// Write sends one datagram to the peer.
func (p *PeerConn) Write(b []byte) (int, error) {
	select {
	case <-p.closed:
		return 0, net.ErrClosed
	default:
	}
	if err := p.c.write(relaywire.Transport(p.id, b)); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Close stops using the connection (the relay connection stays).
func (p *PeerConn) Close() error {
	p.c.mu.Lock()
	if p.c.conns[p.id] == p {
		delete(p.c.conns, p.id)
	}
	p.c.mu.Unlock()
	select {
	case <-p.closed:
	default:
		p.closeLocal()
		_ = p.c.write(relaywire.PeerList(relaywire.TypeUnsubscribe, []relaywire.PeerID{p.id})[0])
	}
	return nil
}

// Done is closed when the connection is gone (peer offline, relay lost or Close).
func (p *PeerConn) Done() <-chan struct{} { return p.closed }

type relayAddr string

func (a relayAddr) Network() string { return "relay" }
func (a relayAddr) String() string  { return string(a) }

func (p *PeerConn) LocalAddr() net.Addr              { return relayAddr(p.c.instance) }
func (p *PeerConn) RemoteAddr() net.Addr             { return relayAddr(p.c.instance + "/" + p.id.String()) }
func (p *PeerConn) SetDeadline(time.Time) error      { return nil }
func (p *PeerConn) SetReadDeadline(time.Time) error  { return nil }
func (p *PeerConn) SetWriteDeadline(time.Time) error { return nil }
