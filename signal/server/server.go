// Package server is the signal service: it forwards sealed offer, answer and
// candidate messages between peers identified by their WireGuard public
// keys. It never decrypts (it has no keys to), never blocks one peer's
// stream on another's, and keeps only the newest stream of each peer.
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
	"google.golang.org/grpc/status"

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
)

// Options tune the server.
type Options struct {
	Log *slog.Logger
	// Queue is the per-destination buffer of undelivered messages.
	Queue int
	// SendTimeout bounds how long Send waits for a full destination queue
	// before the destination, which is not reading, is disconnected.
	SendTimeout time.Duration
	// Bus, when set, joins this instance to others: messages for peers
	// connected elsewhere go through it.
	Bus Bus
}

// Server implements signalexchange.SignalExchange.
type Server struct {
	signalpb.UnimplementedSignalExchangeServer
	o Options

	mu      sync.Mutex
	peers   map[string]*registration
	busSubs map[string]*busSub

	closed    chan struct{}
	closeOnce sync.Once

	forwarded atomic.Uint64
	dropped   atomic.Uint64
	busIn     atomic.Uint64 // delivered here from other instances
	busOut    atomic.Uint64 // handed to other instances
}

type registration struct {
	out   chan *signalpb.EncryptedMessage
	kick  chan struct{} // closed to end the stream (replaced or stuck)
	once  sync.Once
	claim Claim // when and which: orders streams across instances
}

func (r *registration) end() { r.once.Do(func() { close(r.kick) }) }

// New returns a Server.
func New(o Options) *Server {
	if o.Queue <= 0 {
		o.Queue = DefaultQueue
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	return &Server{o: o, peers: map[string]*registration{}, busSubs: map[string]*busSub{}, closed: make(chan struct{})}
}

// Register adds the service to g.
func (s *Server) Register(g *grpc.Server) { signalpb.RegisterSignalExchangeServer(g, s) }

// Close ends every stream.
func (s *Server) Close() { s.closeOnce.Do(func() { close(s.closed) }) }

// Stats reports messages forwarded and dropped (destination absent).
func (s *Server) Stats() (forwarded, dropped uint64) { return s.forwarded.Load(), s.dropped.Load() }

// Connected reports whether a peer has a stream registered.
func (s *Server) Connected(peer string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.peers[peer] != nil
}

// Send forwards msg, unchanged, to the stream of msg.RemoteKey. A message
// for an absent peer is dropped silently, as the reference does.
func (s *Server) Send(ctx context.Context, msg *signalpb.EncryptedMessage) (*signalpb.EncryptedMessage, error) {
	if err := s.route(ctx, msg); err != nil {
		return nil, err
	}
	return &signalpb.EncryptedMessage{}, nil
}

func (s *Server) route(ctx context.Context, msg *signalpb.EncryptedMessage) error {
	if msg.GetRemoteKey() == "" {
		return status.Error(codes.InvalidArgument, "remoteKey is required")
	}
	s.mu.Lock()
	r := s.peers[msg.GetRemoteKey()]
	s.mu.Unlock()
	if r != nil {
		return s.deliver(ctx, r, msg)
	}
	if s.o.Bus != nil {
		if err := s.o.Bus.Publish(msg); err != nil {
			s.o.Log.Warn("signal bus publish", "err", err)
			s.dropped.Add(1)
			return nil
		}
		s.busOut.Add(1)
		return nil
	}
	s.dropped.Add(1)
	return nil
}

// tryDeliver queues msg on a local stream if there is room now.
func (s *Server) tryDeliver(r *registration, msg *signalpb.EncryptedMessage) bool {
	select {
	case r.out <- msg:
		s.forwarded.Add(1)
		return true
	default:
		return false
	}
}

// deliver queues msg on a local stream, waiting a bounded time for room.
func (s *Server) deliver(ctx context.Context, r *registration, msg *signalpb.EncryptedMessage) error {
	if s.tryDeliver(r, msg) {
		return nil
	}
	t := time.NewTimer(s.o.SendTimeout)
	defer t.Stop()
	select {
	case r.out <- msg:
		s.forwarded.Add(1)
		return nil
	case <-r.kick:
		s.dropped.Add(1)
		return nil
	case <-t.C:
		// The destination is not draining its stream: disconnect it so it
		// reconnects, rather than letting every sender queue behind it.
		s.o.Log.Warn("signal destination stuck, disconnecting", "peer", msg.GetRemoteKey())
		r.end()
		s.dropped.Add(1)
		return nil
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
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
	r := &registration{out: make(chan *signalpb.EncryptedMessage, s.o.Queue), kick: make(chan struct{}), claim: newClaim()}
	s.mu.Lock()
	if old := s.peers[id]; old != nil {
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

	recvDone := make(chan struct{})
	go func() {
		defer close(recvDone)
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
				// A stream speaks only for the peer that registered it.
				s.dropped.Add(1)
				continue
			}
			_ = s.route(ctx, m)
		}
	}()
	for {
		select {
		case m := <-r.out:
			if err := stream.Send(m); err != nil {
				return err
			}
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

// Metrics are signal's counters.
func (s *Server) Metrics() []metrics.Sample {
	s.mu.Lock()
	streams := len(s.peers)
	s.mu.Unlock()
	return []metrics.Sample{
		{Name: "signal_streams", Help: "connected peers", Kind: metrics.Gauge, Value: float64(streams)},
		{Name: "signal_messages_forwarded_total", Help: "messages relayed between peers", Kind: metrics.Counter, Value: float64(s.forwarded.Load())},
		{Name: "signal_messages_dropped_total", Help: "messages for absent peers", Kind: metrics.Counter, Value: float64(s.dropped.Load())},
		{Name: "signal_bus_messages_out_total", Help: "messages handed to other instances", Kind: metrics.Counter, Value: float64(s.busOut.Load())},
		{Name: "signal_bus_messages_in_total", Help: "messages from other instances delivered here", Kind: metrics.Counter, Value: float64(s.busIn.Load())},
	}
}
