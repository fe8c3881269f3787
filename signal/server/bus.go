package server

import (
	"crypto/rand"
	"encoding/binary"
	"time"

	"github.com/wiremesh/wiremesh/proto/signalpb"
)

// Bus joins signal instances: a message for a peer whose stream is held by
// another instance travels over it, and an instance taking a peer's stream
// tells the others, so the newest stream wins across instances too.
// signal/natsbus implements it on NATS.
type Bus interface {
	// Publish hands msg to whichever instance holds msg.RemoteKey's stream
	// (nobody: it is dropped, as for an absent peer on one instance).
	Publish(msg *signalpb.EncryptedMessage) error
	// Subscribe delivers to h what other instances send to or claim about
	// peer, until the returned function is called.
	Subscribe(peer string, h BusHandler) (unsubscribe func(), err error)
	// Claim tells every instance that this one took peer's stream at c.
	Claim(peer string, c Claim) error
}

// BusHandler receives what the bus carries for one peer. Its methods do
// not block.
type BusHandler interface {
	Message(msg *signalpb.EncryptedMessage)
	Claimed(c Claim)
}

// Claim orders streams of one peer across instances: the later wins, ties
// broken by the random nonce.
type Claim struct {
	At    int64
	Nonce uint64
}

// After reports whether c is newer than o.
func (c Claim) After(o Claim) bool {
	return c.At > o.At || (c.At == o.At && c.Nonce > o.Nonce)
}

// Bytes encodes c in 16 bytes.
func (c Claim) Bytes() []byte {
	b := make([]byte, 16)
	binary.BigEndian.PutUint64(b, uint64(c.At))
	binary.BigEndian.PutUint64(b[8:], c.Nonce)
	return b
}

// ParseClaim decodes Bytes' output.
func ParseClaim(b []byte) (Claim, bool) {
	if len(b) != 16 {
		return Claim{}, false
	}
	return Claim{At: int64(binary.BigEndian.Uint64(b)), Nonce: binary.BigEndian.Uint64(b[8:])}, true
}

func newClaim() Claim {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return Claim{At: time.Now().UnixNano(), Nonce: binary.BigEndian.Uint64(b[:])}
}

// busSub is this instance's subscription for one peer, shared by the
// peer's successive local streams.
type busSub struct {
	refs  int
	unsub func() // nil until subscribed
	gone  bool   // refs dropped to 0 while subscribing
}

// peerHandler delivers the bus's traffic for one peer to its current
// local stream.
type peerHandler struct {
	s  *Server
	id string
}

func (h peerHandler) Message(msg *signalpb.EncryptedMessage) {
	h.s.mu.Lock()
	r := h.s.peers[h.id]
	h.s.mu.Unlock()
	if r == nil || msg.GetRemoteKey() != h.id {
		h.s.q.drop(dropAbsent)
		return
	}
	// Never blocks: the bus delivers every peer's messages on one
	// goroutine, and a message over a cap is dropped like a local one.
	if h.s.enqueue(r, msg) {
		h.s.busIn.Add(1)
	}
}

func (h peerHandler) Claimed(c Claim) {
	h.s.mu.Lock()
	r := h.s.peers[h.id]
	h.s.mu.Unlock()
	switch {
	case r == nil || r.claim == c:
	case c.After(r.claim):
		// The peer connected again elsewhere: this stream is stale.
		h.s.o.Log.Debug("signal peer moved to another instance", "peer", h.id)
		r.end()
	default:
		// An older stream announced itself late (or before it heard of
		// ours): answer, so that it ends.
		if err := h.s.o.Bus.Claim(h.id, r.claim); err != nil {
			h.s.o.Log.Warn("signal bus claim", "peer", h.id, "err", err)
		}
	}
}

// joinBus subscribes (once per peer) and announces r's claim.
func (s *Server) joinBus(id string, r *registration) {
	s.mu.Lock()
	b := s.busSubs[id]
	first := b == nil
	if first {
		b = &busSub{}
		s.busSubs[id] = b
	}
	b.refs++
	s.mu.Unlock()
	if first {
		unsub, err := s.o.Bus.Subscribe(id, peerHandler{s: s, id: id})
		if err != nil {
			s.o.Log.Warn("signal bus subscribe: messages from other instances will not reach this peer", "peer", id, "err", err)
		}
		s.mu.Lock()
		if b.gone {
			s.mu.Unlock()
			if unsub != nil {
				unsub()
			}
		} else {
			b.unsub = unsub
			s.mu.Unlock()
		}
	}
	if err := s.o.Bus.Claim(id, r.claim); err != nil {
		s.o.Log.Warn("signal bus claim", "peer", id, "err", err)
	}
}

// leaveBus drops one reference to the peer's subscription.
func (s *Server) leaveBus(id string) {
	s.mu.Lock()
	b := s.busSubs[id]
	if b == nil {
		s.mu.Unlock()
		return
	}
	b.refs--
	if b.refs > 0 {
		s.mu.Unlock()
		return
	}
	delete(s.busSubs, id)
	unsub := b.unsub
	b.gone = true
	s.mu.Unlock()
	if unsub != nil {
		unsub()
	}
}
