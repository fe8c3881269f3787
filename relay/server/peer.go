package server

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wiremesh/wiremesh/internal/relayconn"
	"github.com/wiremesh/wiremesh/internal/relaywire"
)

// peer is one authenticated connection: a reader (this goroutine of
// handle), a writer draining the send queue, and a health checker.
type peer struct {
	s  *Server
	id relaywire.PeerID
	c  relayconn.Conn

	out      chan []byte
	qmu      sync.Mutex   // guards qclosed; held while queueing data
	qclosed  bool         // the writer is gone: queue nothing more
	queued   atomic.Int64 // bytes in out
	ctrl     chan []byte  // control messages are never dropped for data
	done     chan struct{}
	stopOnce sync.Once

	acked   atomic.Bool  // a health-check echo arrived since the last liveness tick
	writing atomic.Int64 // unix nanos when the current write began, 0 when idle

	// subs are the IDs this peer subscribed to; guarded by s.mu, nil once
	// the peer is leaving.
	subs map[relaywire.PeerID]struct{}

	warnedSubs bool // reader goroutine only

	// token bucket for what the peer sends (reader goroutine only)
	tokens float64
	last   time.Time
}

func newPeer(s *Server, id relaywire.PeerID, c relayconn.Conn) *peer {
	return &peer{s: s, id: id, c: c, out: make(chan []byte, s.o.SendQueue), ctrl: make(chan []byte, 64),
		done: make(chan struct{}), subs: map[relaywire.PeerID]struct{}{},
		tokens: float64(s.o.PeerBurst), last: s.o.Now()}
}

// stop ends the connection; every goroutine of the peer then returns.
func (p *peer) stop() {
	p.stopOnce.Do(func() {
		close(p.done)
		p.c.Close()
	})
}

// enqueue queues a control message for the peer. It waits for room
// (bounded by the peer's lifetime: a writer that hangs is dropped after
// WriteTimeout); control messages are never dropped for data.
func (p *peer) enqueue(msg []byte) bool {
	select {
	case p.ctrl <- msg:
		return true
	case <-p.done:
		return false
	}
}

// Errors of queueing data.
var (
	errQueueFull  = errors.New("send queue full")
	errQueueBytes = errors.New("send queue over its byte cap")
	errGone       = errors.New("peer gone")
)

// enqueueData queues a transport message for the peer, dropping it when
// the queue holds SendQueue messages, or QueueBytesPerPeer bytes, or all
// queues together QueueBytes.
func (p *peer) enqueueData(msg []byte) error {
	n := int64(len(msg))
	p.qmu.Lock()
	defer p.qmu.Unlock()
	if p.qclosed {
		return errGone
	}
	if p.queued.Load()+n > p.s.o.QueueBytesPerPeer || p.s.queued.Load()+n > p.s.o.QueueBytes {
		return errQueueBytes
	}
	// Counted before it is queued: the writer may take it at once.
	p.queued.Add(n)
	p.s.queued.Add(n)
	select {
	case p.out <- msg:
		return nil
	default:
		p.dequeued(msg)
		return errQueueFull
	}
}

// dequeued accounts for a message the writer took from out.
func (p *peer) dequeued(msg []byte) {
	n := int64(len(msg))
	p.queued.Add(-n)
	p.s.queued.Add(-n)
}

// closeQueue stops queueing once the writer is gone and returns what is
// left in the queue to the overall budget.
func (p *peer) closeQueue() {
	p.qmu.Lock()
	defer p.qmu.Unlock()
	p.qclosed = true
	p.s.queued.Add(-p.queued.Swap(0))
}

// notify sends a peer-state message about one ID.
func (p *peer) notify(t relaywire.Type, id relaywire.PeerID) {
	for _, m := range relaywire.PeerList(t, []relaywire.PeerID{id}) {
		if !p.enqueue(m) {
			return
		}
	}
}

// run serves the peer until it leaves, fails or is replaced.
func (p *peer) run() {
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); p.writeLoop() }()
	go func() { defer wg.Done(); p.healthLoop() }()
	p.readLoop()
	p.stop()
	wg.Wait()
}

// write sends one message. It carries no per-write context (a timer per
// datagram costs more than the forwarding); the health loop enforces the
// write timeout instead, closing a peer whose write has hung.
func (p *peer) write(msg []byte) bool {
	p.writing.Store(p.s.o.Now().UnixNano())
	err := p.c.WriteMessage(context.Background(), msg)
	p.writing.Store(0)
	if err != nil {
		p.s.log.Debug("relay write", "peer", p.id, "err", err)
		return false
	}
	return true
}

func (p *peer) writeLoop() {
	defer p.stop()
	for {
		// Control first: an auth response must precede any data.
		select {
		case m := <-p.ctrl:
			if !p.write(m) {
				return
			}
			continue
		default:
		}
		select {
		case <-p.done:
			return
		case m := <-p.ctrl:
			if !p.write(m) {
				return
			}
		case m := <-p.out:
			p.dequeued(m)
			if !p.write(m) {
				return
			}
		}
	}
}

// healthLoop sends a health check every interval and drops the peer when
// no echo came within a liveness window (interval + 20 s, as the reference).
func (p *peer) healthLoop() {
	every := p.s.o.HealthInterval
	window := every + every*4/5
	send := time.NewTicker(every)
	defer send.Stop()
	check := time.NewTicker(window)
	defer check.Stop()
	stuck := time.NewTicker(min(p.s.o.WriteTimeout/4, time.Second))
	defer stuck.Stop()
	for {
		select {
		case <-p.done:
			return
		case <-stuck.C:
			if w := p.writing.Load(); w != 0 && p.s.o.Now().Sub(time.Unix(0, w)) > p.s.o.WriteTimeout {
				p.s.log.Info("relay write to peer hung, dropping it", "peer", p.id)
				p.stop()
				return
			}
		case <-send.C:
			if !p.enqueue(relaywire.Simple(relaywire.TypeHealthCheck)) {
				return
			}
		case <-check.C:
			if !p.acked.Swap(false) {
				p.s.log.Info("relay peer stopped answering health checks, dropping it", "peer", p.id)
				p.s.m.healthDropped.Add(1)
				p.stop()
				return
			}
		}
	}
}

// allow charges n bytes to the peer's token bucket.
func (p *peer) allow(n int) bool {
	now := p.s.o.Now()
	p.tokens = min(float64(p.s.o.PeerBurst), p.tokens+now.Sub(p.last).Seconds()*float64(p.s.o.PeerRate))
	p.last = now
	if p.tokens < float64(n) {
		return false
	}
	p.tokens -= float64(n)
	return true
}

func (p *peer) readLoop() {
	for {
		msg, err := p.c.ReadMessage(p.s.ctx)
		if err != nil {
			return
		}
		t, err := relaywire.Header(msg)
		if err != nil || !t.FromClient() || t == relaywire.TypeAuth {
			p.s.log.Debug("relay peer sent an invalid message, closing", "peer", p.id, "type", t, "err", err)
			return
		}
		switch t {
		case relaywire.TypeTransport:
			if !p.allow(len(msg)) {
				p.s.m.droppedLimited.Add(1)
				continue
			}
			p.s.route(p, msg)
		case relaywire.TypeHealthCheck:
			p.acked.Store(true)
		case relaywire.TypeClose:
			p.s.log.Debug("relay peer exited gracefully", "peer", p.id)
			return
		case relaywire.TypeSubscribe:
			ids, err := relaywire.ParsePeerList(msg)
			if err != nil {
				p.s.log.Debug("relay subscribe", "peer", p.id, "err", err)
				continue // logged and ignored, as the reference
			}
			now, refused := p.s.subscribe(p, ids)
			if refused > 0 {
				p.s.m.subsRefused.Add(int64(refused))
				if !p.warnedSubs {
					p.warnedSubs = true
					p.s.log.Warn("relay peer over its subscription cap, refusing the excess", "peer", p.id, "refused", refused)
				}
			}
			if len(now) > 0 {
				for _, m := range relaywire.PeerList(relaywire.TypePeersOnline, now) {
					if !p.enqueue(m) {
						return
					}
				}
			}
		case relaywire.TypeUnsubscribe:
			ids, err := relaywire.ParsePeerList(msg)
			if err != nil {
				continue
			}
			p.s.unsubscribe(p, ids)
		}
	}
}
