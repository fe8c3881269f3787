package grpcapi

import (
	"context"
	"math/bits"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/grpcserver"
)

// Memory of a fan-out. gRPC keeps every message a stream was sent until
// the client has read it, and HTTP/2 flow control lets a connection's
// streams drain only as fast as that client reads: one change in an
// account of N official clients (whole maps) used to queue N maps of N
// peers at once, memory growing as N² (2,000 peers: ~1 GB of queued maps,
// measured with heap profiles, docs/scale-out.md). So the bytes of maps
// built and not yet written out are bounded by a budget: a stream takes
// its share before it builds its map and gives it back when the transport
// has written the message (grpcserver.Encoded). A stream waiting for the
// budget builds the newest map once it gets it, never an older one, and
// nothing is dropped: it waits its turn.

// DefaultSendBudget is Options.SendBudget's default: enough maps in
// flight to keep every core and connection busy.
const DefaultSendBudget = 24 << 20

// sendHoldMax is how long a message may hold its share of the budget
// while its client does not read: past it the share moves to the budget's
// overflow, as large as the budget, if it fits there (the message stays
// queued for that client), so clients that stopped reading delay the
// others, never stop them, and queued bytes stay under twice the budget.
const sendHoldMax = 10 * time.Second

// budget is a FIFO weighted semaphore of bytes, with an overflow of the
// same size for the shares of messages stuck at clients that do not read.
type budget struct {
	mu       sync.Mutex
	size     int64
	used     int64
	overflow int64
	waiters  []*budgetWaiter
}

type budgetWaiter struct {
	n     int64
	ready chan struct{}
}

func newBudget(size int64) *budget { return &budget{size: size} }

// acquire takes n bytes (at most the whole budget), waiting in turn;
// it returns the amount to release later.
func (b *budget) acquire(ctx context.Context, n int64) (int64, error) {
	n = min(max(n, 1), b.size)
	b.mu.Lock()
	if len(b.waiters) == 0 && b.used+n <= b.size {
		b.used += n
		b.mu.Unlock()
		return n, nil
	}
	w := &budgetWaiter{n: n, ready: make(chan struct{})}
	b.waiters = append(b.waiters, w)
	b.mu.Unlock()
	select {
	case <-w.ready:
		return n, nil
	case <-ctx.Done():
		b.mu.Lock()
		select {
		case <-w.ready: // granted meanwhile: give it back
			b.mu.Unlock()
			b.release(n)
		default:
			for i, x := range b.waiters {
				if x == w {
					b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
					break
				}
			}
			b.grant() // the head may have changed
			b.mu.Unlock()
		}
		return 0, ctx.Err()
	}
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.grant()
	b.mu.Unlock()
}

// grant wakes waiters in order while they fit; b.mu held.
func (b *budget) grant() {
	for len(b.waiters) > 0 && b.used+b.waiters[0].n <= b.size {
		w := b.waiters[0]
		b.waiters = b.waiters[1:]
		b.used += w.n
		close(w.ready)
	}
}

// toOverflow moves n bytes held from the budget to the overflow if they
// fit there (false: they stay held).
func (b *budget) toOverflow(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.overflow+n > b.size {
		return false
	}
	b.overflow += n
	b.used -= n
	b.grant()
	return true
}

func (b *budget) releaseOverflow(n int64) {
	b.mu.Lock()
	b.overflow -= n
	b.mu.Unlock()
}

// inUse is the number of bytes held, for the metric.
func (b *budget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used + b.overflow
}

// sealedMsg is a response sealed straight into its EncryptedMessage wire
// encoding, with the share of the budget it holds.
type sealedMsg struct {
	wire []byte
	held int64
}

// sealWire seals plain for sh into the wire encoding of
// EncryptedMessage{wgPubKey: server key, body: sealed}.
func (s *Server) sealWire(sh *envelope.Shared, plain []byte) ([]byte, error) {
	pub := s.pub.String()
	bodyLen := envelope.Overhead + len(plain)
	n := protowire.SizeTag(1) + protowire.SizeBytes(len(pub)) + protowire.SizeTag(2) + protowire.SizeBytes(bodyLen)
	out := s.bufs.get(n)
	out = protowire.AppendTag(out, 1, protowire.BytesType)
	out = protowire.AppendString(out, pub)
	out = protowire.AppendTag(out, 2, protowire.BytesType)
	out = protowire.AppendVarint(out, uint64(bodyLen))
	out, err := sh.SealAppend(out, plain)
	if err != nil {
		return nil, status.Error(codes.Internal, "seal response")
	}
	return out, nil
}

// sealMsg marshals and seals m as sealWire does.
func (s *Server) sealMsg(sh *envelope.Shared, m proto.Message) (*sealedMsg, error) {
	plain, err := proto.MarshalOptions{}.MarshalAppend(s.bufs.get(proto.Size(m)), m)
	if err != nil {
		return nil, status.Error(codes.Internal, "seal response")
	}
	wire, err := s.sealWire(sh, plain)
	s.bufs.put(plain)
	if err != nil {
		return nil, err
	}
	return &sealedMsg{wire: wire}, nil
}

// sendSealed writes m on stream. Its share of the budget goes back when
// the transport is done with it, or after sendHoldMax, or when the stream
// ends, whichever comes first; written is closed when the transport is
// done with it (or the stream ended), for the stream's own back-pressure.
func (s *Server) sendSealed(ctx context.Context, stream grpc.ServerStream, m *sealedMsg) (written <-chan struct{}, err error) {
	var (
		mu       sync.Mutex
		given    bool
		overflow bool
	)
	giveBack := func() {
		mu.Lock()
		defer mu.Unlock()
		if given {
			return
		}
		given = true
		if overflow {
			s.sendBudget.releaseOverflow(m.held)
		} else {
			s.sendBudget.release(m.held)
		}
	}
	var t *time.Timer
	expire := func() {
		mu.Lock()
		defer mu.Unlock()
		if given || overflow {
			return
		}
		if overflow = s.sendBudget.toOverflow(m.held); !overflow {
			t.Reset(sendHoldMax) // the overflow is full: try again later
		}
	}
	done := make(chan struct{})
	var doneOnce sync.Once
	finish := func() { giveBack(); doneOnce.Do(func() { close(done) }) }
	stop := context.AfterFunc(ctx, finish)
	e := grpcserver.NewEncoded(m.wire, func() {
		s.bufs.put(m.wire) // written out or dropped: gRPC holds it no more
		finish()
		stop()
		t.Stop()
	})
	mu.Lock()
	t = time.AfterFunc(sendHoldMax, expire)
	mu.Unlock()
	if err := stream.SendMsg(e); err != nil {
		// gRPC gave up its references before returning the error.
		e.Release()
		return done, err
	}
	return done, nil
}

// bufPool recycles the large buffers of maps (encoded, sealed) by size
// class (powers of two), so a fan-out reuses the buffers of the maps
// already written out instead of leaving the collector a whole map of
// garbage per stream.
type bufPool struct{ classes [maxPoolClass + 1]sync.Pool }

// Buffers from 4 KiB to 128 MiB are pooled; others are allocated.
const (
	minPoolClass = 12
	maxPoolClass = 27
)

// get returns an empty buffer of capacity at least n; nil p allocates.
func (p *bufPool) get(n int) []byte {
	c := bits.Len(uint(max(n, 1) - 1))
	if p == nil || c > maxPoolClass {
		return make([]byte, 0, n)
	}
	c = max(c, minPoolClass)
	if b, ok := p.classes[c].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<c)
}

// put gives b back; only buffers of a class's exact capacity are kept.
func (p *bufPool) put(b []byte) {
	if p == nil || b == nil {
		return
	}
	c := bits.Len(uint(cap(b)) - 1)
	if c < minPoolClass || c > maxPoolClass || cap(b) != 1<<c {
		return
	}
	b = b[:0]
	p.classes[c].Put(&b)
}
