// Package server is the signal service: it forwards sealed offer, answer and
// candidate messages between peers identified by their WireGuard public
// keys. It never decrypts (it has no keys to), never blocks one peer's
// stream on another's, and keeps only the newest stream of each peer.
// What it holds for delivery is capped per destination, per sender and in
// total (Limits), so no client, logged in or not, can make it grow
// without bound; a message over a cap is dropped and counted.
package server

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/proto/signalpb"
)

// Header names of the signal protocol.
const (
	HeaderPeerID     = "x-wiretrustee-peer-id"
	HeaderRegistered = "x-wiretrustee-peer-registered"
)

// Defaults for Options.
const (
	DefaultQueue       = 256
	DefaultSendTimeout = 5 * time.Second
	DefaultMaxStreams  = 100_000
)

// DefaultLimits bound what signal holds for delivery. Real signalling
// messages are about a kilobyte (half a megabyte with Rosenpass keys);
// the caps leave room for bursts while a flood of maximum-size messages
// to made-up destinations stays within TotalBytes.
var DefaultLimits = Limits{
	DestMessages:   DefaultQueue,
	DestBytes:      4 << 20,
	SourceMessages: 4096,
	SourceBytes:    16 << 20,
	TotalMessages:  1 << 18,
	TotalBytes:     128 << 20,
}

// Limits cap the messages waiting for delivery, counted in messages and
// in encoded bytes: per destination stream, per source (the sender key)
// and over the whole server. A message over any cap is dropped (and
// counted in signal_messages_dropped_total); the sender is not told, as
// for an absent destination. Zero fields take DefaultLimits' values.
type Limits struct {
	DestMessages   int
	DestBytes      int64
	SourceMessages int
	SourceBytes    int64
	TotalMessages  int
	TotalBytes     int64
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits
	if l.DestMessages > 0 {
		d.DestMessages = l.DestMessages
	}
	if l.DestBytes > 0 {
		d.DestBytes = l.DestBytes
	}
	if l.SourceMessages > 0 {
		d.SourceMessages = l.SourceMessages
	}
	if l.SourceBytes > 0 {
		d.SourceBytes = l.SourceBytes
	}
	if l.TotalMessages > 0 {
		d.TotalMessages = l.TotalMessages
	}
	if l.TotalBytes > 0 {
		d.TotalBytes = l.TotalBytes
	}
	return d
}

// Options tune the server.
type Options struct {
	Log *slog.Logger
	// Queue, when set, overrides Limits.DestMessages (kept for callers
	// that predate Limits).
	Queue int
	// Limits cap queued messages; see Limits.
	Limits Limits
	// MaxStreams caps the connected streams (the peer table); a stream
	// beyond it is refused with ResourceExhausted.
	MaxStreams int
	// SendTimeout is how long a stream may sit in one Send (its reader not
	// draining), or hold a large sent message, before it is disconnected
	// (and so freed) when its queue or the total budget is full.
	SendTimeout time.Duration
	// Bus, when set, joins this instance to others: messages for peers
	// connected elsewhere go through it.
	Bus Bus
}

// Server implements signalexchange.SignalExchange.
type Server struct {
	signalpb.UnimplementedSignalExchangeServer
	o Options
	q *budget

	mu      sync.Mutex
	peers   map[string]*registration
	busSubs map[string]*busSub

	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // stream writers and readers

	forwarded     atomic.Uint64
	refusedStream atomic.Uint64 // streams refused at MaxStreams
	reclaimed     atomic.Uint64 // streams ended to free the total budget
	lastReclaim   atomic.Int64  // unix ns of the last reclaim pass
	busIn         atomic.Uint64 // delivered here from other instances
	busOut        atomic.Uint64 // handed to other instances
}

type registration struct {
	id    string
	conn  string // the transport connection that opened the stream
	out   chan queued
	kick  chan struct{} // closed to end the stream (replaced or stuck)
	once  sync.Once
	claim Claim // when and which: orders streams across instances
	// sendingSince is when the current Send began (unix ns), 0 between Sends.
	sendingSince atomic.Int64

	// Guarded by budget.mu.
	use       usage
	held      int64     // excess of the last sent message still charged
	heldSince time.Time // when held was charged
	retired   bool
}

func (r *registration) end() { r.once.Do(func() { close(r.kick) }) }

// New returns a Server.
func New(o Options) *Server {
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.Limits = o.Limits.withDefaults()
	if o.Queue > 0 {
		o.Limits.DestMessages = o.Queue
	}
	if o.MaxStreams <= 0 {
		o.MaxStreams = DefaultMaxStreams
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	return &Server{o: o, q: newBudget(o.Limits), peers: map[string]*registration{}, busSubs: map[string]*busSub{}, closed: make(chan struct{})}
}

// Register adds the service to g.
func (s *Server) Register(g *grpc.Server) { signalpb.RegisterSignalExchangeServer(g, s) }

// Close ends every stream and waits for their goroutines.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock() // no stream starts goroutines after this
		close(s.closed)
		s.mu.Unlock()
	})
	s.wg.Wait()
}

// Stats reports messages forwarded and dropped (for any reason).
func (s *Server) Stats() (forwarded, dropped uint64) {
	for _, c := range s.q.dropped {
		dropped += c.Load()
	}
	return s.forwarded.Load(), dropped
}

// Connected reports whether a peer has a stream registered.
func (s *Server) Connected(peer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peers[peer] != nil
}

// Send forwards msg, unchanged, to the stream of msg.RemoteKey. A message
// for an absent peer is dropped silently, as the reference does.
//
// The sender is checked as on a stream, where a message may only carry the
// key the stream registered: msg.Key must be a WireGuard key whose stream
// this same connection opened (NetBird clients send on the connection that
// holds their stream), or, when the call carries x-wiretrustee-peer-id,
// equal to it. Anything else is refused with PermissionDenied.
func (s *Server) Send(ctx context.Context, msg *signalpb.EncryptedMessage) (*signalpb.EncryptedMessage, error) {
	if msg.GetRemoteKey() == "" {
		return nil, status.Error(codes.InvalidArgument, "remoteKey is required")
	}
	if err := s.checkSender(ctx, msg); err != nil {
		s.q.drop(dropForged)
		return nil, err
	}
	s.route(msg)
	return &signalpb.EncryptedMessage{}, nil
}

// checkSender applies the stream path's rule to a unary Send.
func (s *Server) checkSender(ctx context.Context, msg *signalpb.EncryptedMessage) error {
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		if ids := md.Get(HeaderPeerID); len(ids) > 0 {
			switch msg.GetKey() {
			case "":
				msg.Key = ids[0]
			case ids[0]:
			default:
				return status.Error(codes.PermissionDenied, "key is not the "+HeaderPeerID+" of this call")
			}
		}
	}
	if _, err := key.ParsePublic(msg.GetKey()); err != nil {
		return status.Error(codes.InvalidArgument, "key is not a WireGuard public key")
	}
	conn := connID(ctx)
	s.mu.Lock()
	r := s.peers[msg.GetKey()]
	s.mu.Unlock()
	if r == nil || conn == "" || r.conn != conn {
		return status.Error(codes.PermissionDenied, "key has no signal stream on this connection: open ConnectStream as the sender first")
	}
	return nil
}

// connID names the transport connection a call came in on.
func connID(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	local := ""
	if p.LocalAddr != nil {
		local = p.LocalAddr.String()
	}
	return p.Addr.String() + "|" + local
}

// route hands a checked msg to its destination's stream, here or through
// the bus. Nothing waits: a message over a cap is dropped and counted.
func (s *Server) route(msg *signalpb.EncryptedMessage) {
	s.mu.Lock()
	r := s.peers[msg.GetRemoteKey()]
	s.mu.Unlock()
	if r != nil {
		s.enqueue(r, msg)
		return
	}
	if s.o.Bus != nil {
		if err := s.o.Bus.Publish(msg); err != nil {
			s.o.Log.Warn("signal bus publish", "err", err)
			s.q.drop(dropAbsent)
			return
		}
		s.busOut.Add(1)
		return
	}
	s.q.drop(dropAbsent)
}

// enqueue queues msg on a local stream within the budget.
func (s *Server) enqueue(r *registration, msg *signalpb.EncryptedMessage) bool {
	q := queued{msg: msg, src: msg.GetKey(), size: int64(proto.Size(msg)) + msgOverhead}
	if reason := s.q.enqueue(r, q); reason != "" {
		s.q.drop(reason)
		switch {
		case reason == dropDestFull && s.stuck(r):
			// The destination is not draining its stream: disconnect it so
			// it reconnects, and so grpc frees what it buffered for it.
			s.o.Log.Warn("signal destination stuck, disconnecting", "peer", r.id)
			r.end()
		case reason == dropTotalFull:
			s.reclaim()
		}
		return false
	}
	s.forwarded.Add(1)
	return true
}

// stuck reports whether r's writer has been blocked in one Send (its
// reader not draining) for longer than SendTimeout.
func (s *Server) stuck(r *registration) bool {
	t := r.sendingSince.Load()
	return t != 0 && time.Since(time.Unix(0, t)) > s.o.SendTimeout
}

// reclaim runs when the total budget is full: streams stuck in Send, and
// streams that have held a large sent message for longer than SendTimeout
// without taking another (a reader that does not drain, or an idle one),
// are ended, which frees what grpc buffered for them; a live client
// reconnects at once. It runs inline, at most once per SendTimeout/2.
func (s *Server) reclaim() {
	now := time.Now().UnixNano()
	last := s.lastReclaim.Load()
	if now-last < int64(s.o.SendTimeout/2) || !s.lastReclaim.CompareAndSwap(last, now) {
		return
	}
	s.mu.Lock()
	regs := make([]*registration, 0, len(s.peers))
	for _, r := range s.peers {
		regs = append(regs, r)
	}
	s.mu.Unlock()
	for _, r := range regs {
		if s.stuck(r) || s.q.heldLongerThan(r, s.o.SendTimeout) {
			s.reclaimed.Add(1)
			r.end()
		}
	}
}

// ConnectStream registers the caller under its x-wiretrustee-peer-id
// header and delivers every message addressed to it. Messages the client
// sends on the stream are routed like Send.
func (s *Server) ConnectStream(stream grpc.BidiStreamingServer[signalpb.EncryptedMessage, signalpb.EncryptedMessage]) error {
	ctx := stream.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	ids := md.Get(HeaderPeerID)
	if len(ids) == 0 || ids[0] == "" {
		return status.Error(codes.FailedPrecondition, "missing "+HeaderPeerID+" header")
	}
	id := ids[0]
	if _, err := key.ParsePublic(id); err != nil {
		return status.Error(codes.InvalidArgument, HeaderPeerID+" is not a WireGuard public key")
	}
	r := &registration{id: id, conn: connID(ctx), out: make(chan queued, s.o.Limits.DestMessages), kick: make(chan struct{}), claim: newClaim()}
	s.mu.Lock()
	select {
	case <-s.closed:
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "server shutting down")
	default:
	}
	old := s.peers[id]
	if old == nil && len(s.peers) >= s.o.MaxStreams {
		s.mu.Unlock()
		s.refusedStream.Add(1)
		return status.Error(codes.ResourceExhausted, "signal server at its stream limit")
	}
	if old != nil {
		old.end() // newest stream wins
	}
	s.peers[id] = r
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		if s.peers[id] == r {
			delete(s.peers, id)
		}
		s.mu.Unlock()
		s.q.shut(r)
	}()
	if s.o.Bus != nil {
		s.joinBus(id, r)
		defer s.leaveBus(id)
	}
	// The client blocks on Header() until this arrives, so send it now
	// rather than with the first message.
	if err := stream.SendHeader(metadata.Pairs(HeaderRegistered, "1")); err != nil {
		return err
	}
	s.o.Log.Debug("signal peer connected", "peer", id)

	// The writer sends queued messages; it may block in Send on a reader
	// that does not drain (see stuck: the stream is then ended when more
	// arrives for it or the budget runs out). It ends when Send fails,
	// which grpc makes happen once this handler returns.
	s.mu.Lock()
	select {
	case <-s.closed:
		s.mu.Unlock()
		return status.Error(codes.Unavailable, "server shutting down")
	default:
		s.wg.Add(2) // the writer and the reader below; under mu, so never after Close
	}
	s.mu.Unlock()
	stop := make(chan struct{})
	defer close(stop)
	writeErr := make(chan error, 1)
	go func() {
		defer s.wg.Done()
		defer s.q.retire(r)
		writeErr <- s.write(stream, r, stop)
	}()
	recvDone := make(chan struct{})
	go func() {
		defer s.wg.Done()
		defer close(recvDone)
		s.read(stream, id)
	}()
	for {
		select {
		case err := <-writeErr:
			return err
		case <-r.kick:
			return status.Error(codes.Aborted, "stream replaced or not draining")
		case <-s.closed:
			return status.Error(codes.Unavailable, "server shutting down")
		case <-ctx.Done():
			return nil
		case <-recvDone:
			// Half-closed by the client: keep delivering until the context ends.
			recvDone = nil
		}
	}
}

// write sends r's queued messages on stream until stop or a failed Send.
func (s *Server) write(stream grpc.BidiStreamingServer[signalpb.EncryptedMessage, signalpb.EncryptedMessage], r *registration, stop <-chan struct{}) error {
	for {
		select {
		case q := <-r.out:
			r.sendingSince.Store(time.Now().UnixNano())
			err := stream.Send(q.msg)
			r.sendingSince.Store(0)
			s.q.sent(r, q, err == nil)
			if err != nil {
				return err
			}
		case <-stop:
			return nil
		}
	}
}

// read routes what the client sends on its stream (NetBird's unused
// SendToStream): a stream speaks only for the peer that registered it.
func (s *Server) read(stream grpc.BidiStreamingServer[signalpb.EncryptedMessage, signalpb.EncryptedMessage], id string) {
	for {
		m, err := stream.Recv()
		if err != nil {
			return
		}
		switch m.GetKey() {
		case "":
			m.Key = id
		case id:
		default:
			s.q.drop(dropForged)
			continue
		}
		if m.GetRemoteKey() == "" {
			s.q.drop(dropAbsent)
			continue
		}
		s.route(m)
	}
}

// Metrics are signal's counters.
func (s *Server) Metrics() []metrics.Sample {
	s.mu.Lock()
	streams := len(s.peers)
	s.mu.Unlock()
	total, sources := s.q.snapshot()
	lim := s.o.Limits
	out := []metrics.Sample{
		{Name: "signal_streams", Help: "connected peers", Kind: metrics.Gauge, Value: float64(streams)},
		{Name: "signal_streams_limit", Help: "most streams served at once (--max-streams)", Kind: metrics.Gauge, Value: float64(s.o.MaxStreams)},
		{Name: "signal_streams_refused_total", Help: "streams refused at the stream limit", Kind: metrics.Counter, Value: float64(s.refusedStream.Load())},
		{Name: "signal_streams_reclaimed_total", Help: "streams ended because they held large undrained messages while the queues were full", Kind: metrics.Counter, Value: float64(s.reclaimed.Load())},
		{Name: "signal_messages_forwarded_total", Help: "messages queued for a connected peer", Kind: metrics.Counter, Value: float64(s.forwarded.Load())},
	}
	for _, r := range dropReasons {
		out = append(out, metrics.Sample{Name: "signal_messages_dropped_total", Help: "messages not delivered, by reason (absent peer, a queue cap, forged sender, stream ended)", Kind: metrics.Counter, Value: float64(s.q.dropped[r].Load()), Labels: `reason="` + r + `"`})
	}
	return append(out,
		metrics.Sample{Name: "signal_queued_messages", Help: "messages waiting for delivery, all streams", Kind: metrics.Gauge, Value: float64(total.msgs)},
		metrics.Sample{Name: "signal_queued_bytes", Help: "bytes waiting for delivery (or in the transport beyond its allowance), all streams", Kind: metrics.Gauge, Value: float64(total.bytes)},
		metrics.Sample{Name: "signal_queued_sources", Help: "sender keys with messages waiting", Kind: metrics.Gauge, Value: float64(sources)},
		metrics.Sample{Name: "signal_queue_limit_messages", Help: "caps on waiting messages", Kind: metrics.Gauge, Value: float64(lim.DestMessages), Labels: `scope="destination"`},
		metrics.Sample{Name: "signal_queue_limit_messages", Help: "caps on waiting messages", Kind: metrics.Gauge, Value: float64(lim.SourceMessages), Labels: `scope="source"`},
		metrics.Sample{Name: "signal_queue_limit_messages", Help: "caps on waiting messages", Kind: metrics.Gauge, Value: float64(lim.TotalMessages), Labels: `scope="total"`},
		metrics.Sample{Name: "signal_queue_limit_bytes", Help: "caps on waiting bytes", Kind: metrics.Gauge, Value: float64(lim.DestBytes), Labels: `scope="destination"`},
		metrics.Sample{Name: "signal_queue_limit_bytes", Help: "caps on waiting bytes", Kind: metrics.Gauge, Value: float64(lim.SourceBytes), Labels: `scope="source"`},
		metrics.Sample{Name: "signal_queue_limit_bytes", Help: "caps on waiting bytes", Kind: metrics.Gauge, Value: float64(lim.TotalBytes), Labels: `scope="total"`},
		metrics.Sample{Name: "signal_bus_messages_out_total", Help: "messages handed to other instances", Kind: metrics.Counter, Value: float64(s.busOut.Load())},
		metrics.Sample{Name: "signal_bus_messages_in_total", Help: "messages from other instances delivered here", Kind: metrics.Counter, Value: float64(s.busIn.Load())},
	)
}
