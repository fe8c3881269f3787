// Package server is the relay service: a message switch keyed by peer ID
// that speaks the NetBird relay protocol (SPEC-relay) over WebSocket and
// QUIC. Peers authenticate with the HMAC tokens management issues; the
// server forwards transport messages to the connection of the destination
// peer and tells subscribers when peers come and go. It never looks inside
// payloads (end-to-end encrypted WireGuard datagrams).
//
// Unlike the reference, a slow destination does not stall its senders:
// each connection has a bounded send queue drained by its own writer, and a
// full queue drops the datagram as a full UDP socket would.
//
// Every table and queue is capped, per connection and overall, in count
// and (where entries vary in size) in bytes: handshakes in progress (also
// per source address), peer-state subscriptions, and queued datagrams.
// What a cap refuses is counted in a metric (see Metrics).
//
// Tokens are bound to a peer ID (relaywire.IssueFor): a token presented
// for any other ID is refused. Unbound tokens, the reference's format, are
// refused unless Options.AllowUnboundTokens.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/quic-go/quic-go"

	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/relaywire"
)

// Options configure a relay.
type Options struct {
	// InstanceURL is sent verbatim in every auth response: the dialable
	// rel://host:port or rels://host:port clients compare and dial.
	InstanceURL string
	// Secret is the token secret shared with management.
	Secret string
	Log    *slog.Logger

	// Zero values take the protocol's defaults.
	HandshakeTimeout time.Duration // 10 s
	HealthInterval   time.Duration // 25 s; a peer silent for 45 s more is dropped
	WriteTimeout     time.Duration // 10 s
	SendQueue        int           // messages queued per connection, 2048
	// PeerRate limits what one peer may send, in bytes per second (0: 1 GB/s),
	// with bursts of PeerBurst bytes (0: one second's worth).
	PeerRate  int64
	PeerBurst int64

	// AllowUnboundTokens accepts tokens bound to no peer ID (issued by
	// NetBird's management). Any holder of such a token can then claim
	// any peer ID, taking over that peer's relay connection.
	AllowUnboundTokens bool

	// Caps; zero values take the defaults below.
	MaxSubscriptionsPerPeer int   // peer IDs one connection watches, 4096
	MaxSubscriptions        int   // over all connections, 1 << 20
	QueueBytesPerPeer       int64 // bytes queued for one connection, 4 MiB
	QueueBytes              int64 // bytes queued over all connections, 512 MiB
	MaxHandshakes           int   // connections not yet authenticated, 4096
	MaxHandshakesPerSource  int   // the same from one IP address, 64

	Now func() time.Time
}

// Defaults of the caps.
const (
	DefaultMaxSubscriptionsPerPeer = 4096
	DefaultMaxSubscriptions        = 1 << 20
	DefaultQueueBytesPerPeer       = 4 << 20
	DefaultQueueBytes              = 512 << 20
	DefaultMaxHandshakes           = 4096
	DefaultMaxHandshakesPerSource  = 64
)

// Errors of admission.
var (
	ErrTooManyHandshakes = errors.New("too many connections authenticating")
	ErrSourceHandshakes  = errors.New("too many connections authenticating from this address")
)

// Server is a running relay.
type Server struct {
	o   Options
	log *slog.Logger

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.RWMutex
	peers   map[relaywire.PeerID]*peer
	online  map[relaywire.PeerID]map[*peer]struct{} // one-shot "tell me when X connects"
	offline map[relaywire.PeerID]map[*peer]struct{} // "tell me when X leaves"
	closed  bool
	subs    int // subscriptions held by all peers

	hsMu     sync.Mutex
	hsTotal  int
	hsSource map[netip.Addr]int // handshakes in progress per source; entries > 0 only

	queued atomic.Int64 // bytes in every send queue

	m counters
}

// New returns a relay. Close it to disconnect every peer.
func New(o Options) (*Server, error) {
	if o.InstanceURL == "" {
		return nil, errors.New("relay: no instance URL (the rel:// or rels:// address clients dial)")
	}
	if _, err := relayconn.WSURL(o.InstanceURL); err != nil {
		return nil, err
	}
	if o.Secret == "" {
		return nil, errors.New("relay: no auth secret")
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	if o.HandshakeTimeout <= 0 {
		o.HandshakeTimeout = 10 * time.Second
	}
	if o.HealthInterval <= 0 {
		o.HealthInterval = 25 * time.Second
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.SendQueue <= 0 {
		o.SendQueue = 2048
	}
	if o.PeerRate <= 0 {
		o.PeerRate = 1 << 30
	}
	if o.PeerBurst <= 0 {
		o.PeerBurst = o.PeerRate
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	defaultInt(&o.MaxSubscriptionsPerPeer, DefaultMaxSubscriptionsPerPeer)
	defaultInt(&o.MaxSubscriptions, DefaultMaxSubscriptions)
	defaultInt(&o.MaxHandshakes, DefaultMaxHandshakes)
	defaultInt(&o.MaxHandshakesPerSource, DefaultMaxHandshakesPerSource)
	if o.QueueBytesPerPeer <= 0 {
		o.QueueBytesPerPeer = DefaultQueueBytesPerPeer
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = DefaultQueueBytes
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Server{o: o, log: o.Log, ctx: ctx, cancel: cancel,
		peers: map[relaywire.PeerID]*peer{}, hsSource: map[netip.Addr]int{},
		online: map[relaywire.PeerID]map[*peer]struct{}{}, offline: map[relaywire.PeerID]map[*peer]struct{}{}}, nil
}

func defaultInt(v *int, d int) {
	if *v <= 0 {
		*v = d
	}
}

// InstanceURL is the address the relay announces.
func (s *Server) InstanceURL() string { return s.o.InstanceURL }

// ServeHTTP accepts a WebSocket relay connection (mount it at /relay).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	c, err := relayconn.AcceptWS(w, r)
	if err != nil {
		s.log.Debug("relay WebSocket upgrade", "remote", r.RemoteAddr, "err", err)
		return
	}
	s.wg.Add(1)
	defer s.wg.Done()
	s.handle(c)
}

// ServeQUIC accepts QUIC connections until ln is closed or the server is.
func (s *Server) ServeQUIC(ln *quic.Listener) error {
	for {
		qc, err := ln.Accept(s.ctx)
		if err != nil {
			if s.ctx.Err() != nil {
				return nil
			}
			return err
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.handle(relayconn.WrapQUIC(qc))
		}()
	}
}

// Close tells every peer the relay is going (close message, 3 s budget),
// disconnects them and waits for their goroutines.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	ps := make([]*peer, 0, len(s.peers))
	for _, p := range s.peers {
		ps = append(ps, p)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			_ = p.c.WriteMessage(ctx, relaywire.Simple(relaywire.TypeClose))
			cancel()
			p.stop()
		}()
	}
	wg.Wait()
	s.cancel()
	s.wg.Wait()
}

// handle runs one connection from handshake to end.
func (s *Server) handle(c relayconn.Conn) {
	s.m.accepted.Add(1)
	release, err := s.admit(c)
	if err != nil {
		s.m.handshakesRefused.Add(1)
		s.log.Debug("relay connection refused", "remote", c.RemoteAddr(), "err", err)
		c.Close()
		return
	}
	id, err := s.handshake(c)
	release()
	if err != nil {
		s.m.authFailures.Add(1)
		switch {
		case errors.Is(err, relaywire.ErrTokenOtherPeer):
			s.m.tokensOtherPeer.Add(1)
		case errors.Is(err, relaywire.ErrTokenUnbound):
			s.m.tokensUnbound.Add(1)
		}
		lvl := slog.LevelInfo
		if id == relaywire.HashID("healthcheck-agent") {
			lvl = slog.LevelDebug
		}
		s.log.Log(s.ctx, lvl, "relay auth refused", "remote", c.RemoteAddr(), "transport", c.Transport(), "err", err)
		c.Close() // no reply: the reference closes silently
		return
	}
	p := newPeer(s, id, c)
	if !s.register(p) {
		c.Close()
		return
	}
	s.log.Debug("relay peer connected", "peer", id, "remote", c.RemoteAddr(), "transport", c.Transport())
	s.m.connections.Add(1)
	p.run()
	s.m.connections.Add(-1)
	p.closeQueue()
	s.unregister(p)
	s.log.Debug("relay peer disconnected", "peer", id)
}

func (s *Server) handshake(c relayconn.Conn) (relaywire.PeerID, error) {
	ctx, cancel := context.WithTimeout(s.ctx, s.o.HandshakeTimeout)
	defer cancel()
	msg, err := c.ReadMessage(ctx)
	if err != nil {
		return relaywire.PeerID{}, fmt.Errorf("read auth: %w", err)
	}
	id, token, err := relaywire.ParseAuth(msg)
	if err != nil {
		return id, err
	}
	claims, err := relaywire.Check(s.o.Secret, token, s.o.Now())
	if err != nil {
		return id, err
	}
	if err := claims.For(id, s.o.AllowUnboundTokens); err != nil {
		return id, err
	}
	return id, nil
}

// admit counts a connection that has not authenticated yet against the
// overall and per-source caps; release undoes it.
func (s *Server) admit(c relayconn.Conn) (release func(), err error) {
	src := sourceOf(c.RemoteAddr())
	s.hsMu.Lock()
	defer s.hsMu.Unlock()
	if s.hsTotal >= s.o.MaxHandshakes {
		return nil, ErrTooManyHandshakes
	}
	if s.hsSource[src] >= s.o.MaxHandshakesPerSource {
		return nil, ErrSourceHandshakes
	}
	s.hsTotal++
	s.hsSource[src]++
	return sync.OnceFunc(func() {
		s.hsMu.Lock()
		defer s.hsMu.Unlock()
		s.hsTotal--
		if s.hsSource[src]--; s.hsSource[src] <= 0 {
			delete(s.hsSource, src)
		}
	}), nil
}

// sourceOf is the IP of a remote "ip:port" (the zero Addr if unparsable:
// such connections share one budget).
func sourceOf(remote string) netip.Addr {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// register stores p (the newest connection of an ID wins), tells the
// subscribers waiting for it, and sends p its auth response.
func (s *Server) register(p *peer) bool {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return false
	}
	old := s.peers[p.id]
	s.peers[p.id] = p
	waiting := s.online[p.id]
	delete(s.online, p.id)
	s.mu.Unlock()
	if old != nil {
		s.log.Debug("relay peer reconnected, closing its older connection", "peer", p.id)
		old.stop()
	}
	for sub := range waiting {
		sub.notify(relaywire.TypePeersOnline, p.id)
	}
	// The response goes out after the peer is reachable, as the reference
	// does: a peer that learns it is connected can be sent to at once.
	return p.enqueue(relaywire.AuthResponse(s.o.InstanceURL))
}

// unregister removes p if it is still the ID's connection, drops its
// subscriptions and tells those who asked that it went offline.
func (s *Server) unregister(p *peer) {
	s.mu.Lock()
	current := s.peers[p.id] == p
	if current {
		delete(s.peers, p.id)
	}
	for id := range p.subs {
		s.dropInterest(id, p)
	}
	s.subs -= len(p.subs)
	p.subs = nil
	var watchers []*peer
	if current {
		for w := range s.offline[p.id] {
			watchers = append(watchers, w)
		}
	}
	s.mu.Unlock()
	for _, w := range watchers {
		w.notify(relaywire.TypePeersOff, p.id)
	}
}

// dropInterest removes p's interest in id; s.mu must be held.
func (s *Server) dropInterest(id relaywire.PeerID, p *peer) {
	for _, m := range []map[relaywire.PeerID]map[*peer]struct{}{s.online, s.offline} {
		if set := m[id]; set != nil {
			delete(set, p)
			if len(set) == 0 {
				delete(m, id)
			}
		}
	}
}

// subscribe registers p's interest in ids and returns those online now and
// how many it refused at the caps (a refused ID is neither answered nor
// watched: the client's open of that peer times out).
func (s *Server) subscribe(p *peer, ids []relaywire.PeerID) (now []relaywire.PeerID, refused int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p.subs == nil {
		return nil, 0 // p is leaving
	}
	for _, id := range ids {
		if _, ok := p.subs[id]; !ok {
			if len(p.subs) >= s.o.MaxSubscriptionsPerPeer || s.subs >= s.o.MaxSubscriptions {
				refused++
				continue
			}
			p.subs[id] = struct{}{}
			s.subs++
		}
		add(s.offline, id, p)
		if s.peers[id] != nil {
			now = append(now, id)
		} else {
			add(s.online, id, p)
		}
	}
	return now, refused
}

func (s *Server) unsubscribe(p *peer, ids []relaywire.PeerID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, id := range ids {
		if p.subs == nil {
			return // p is leaving: unregister dropped everything
		}
		if _, ok := p.subs[id]; !ok {
			continue
		}
		delete(p.subs, id)
		s.subs--
		s.dropInterest(id, p)
	}
}

func add(m map[relaywire.PeerID]map[*peer]struct{}, id relaywire.PeerID, p *peer) {
	set := m[id]
	if set == nil {
		set = map[*peer]struct{}{}
		m[id] = set
	}
	set[p] = struct{}{}
}

// route forwards a transport message from src; msg is owned by the caller
// and rewritten in place.
func (s *Server) route(src *peer, msg []byte) {
	dst, _, err := relaywire.ParseTransport(msg)
	if err != nil {
		s.m.dropped.Add(1)
		return
	}
	s.mu.RLock()
	to := s.peers[dst]
	s.mu.RUnlock()
	if to == nil {
		s.m.droppedNoPeer.Add(1) // unknown or offline: dropped silently, as specified
		return
	}
	relaywire.SetTransportID(msg, src.id)
	if err := to.enqueueData(msg); err != nil {
		if errors.Is(err, errQueueBytes) {
			s.m.droppedQueueBytes.Add(1)
		} else {
			s.m.droppedQueue.Add(1)
		}
		return
	}
	s.m.forwarded.Add(1)
	s.m.bytes.Add(int64(len(msg)))
}

// Stats are counts of the server's state, for tests and metrics.
type Stats struct {
	Peers, OnlineWatches, OfflineWatches int
	Subscriptions                        int   // IDs watched, over all peers
	Handshakes                           int   // connections not yet authenticated
	QueuedBytes                          int64 // in every send queue
}

// Stats reports how much state the server holds.
func (s *Server) Stats() Stats {
	s.mu.RLock()
	defer s.mu.RUnlock()
	st := Stats{Peers: len(s.peers), Subscriptions: s.subs, QueuedBytes: s.queued.Load()}
	s.hsMu.Lock()
	st.Handshakes = s.hsTotal
	s.hsMu.Unlock()
	for _, set := range s.online {
		st.OnlineWatches += len(set)
	}
	for _, set := range s.offline {
		st.OfflineWatches += len(set)
	}
	return st
}

type counters struct {
	accepted, authFailures, connections                  atomic.Int64
	forwarded, bytes                                     atomic.Int64
	dropped, droppedNoPeer, droppedQueue, droppedLimited atomic.Int64
	healthDropped                                        atomic.Int64
	droppedQueueBytes, subsRefused, handshakesRefused    atomic.Int64
	tokensOtherPeer, tokensUnbound                       atomic.Int64
}
