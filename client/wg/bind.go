// Package wg runs the WireGuard data plane of the agent: a wireguard-go
// device on a TUN interface, and a conn.Bind that shares WireGuard's UDP
// socket with ICE. STUN packets on that socket go to ICE (so the
// server-reflexive address ICE learns is the one WireGuard uses), everything
// else to WireGuard; peers reached only through a TURN allocation are
// carried over their ICE connection instead. Kernel WireGuard is not driven
// here.
package wg

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.zx2c4.com/wireguard/conn"

	"github.com/wiremesh/wiremesh/internal/sockmark"
)

const (
	packetSize  = 2048 // WireGuard packets stay under MTU + 80 bytes
	queueLength = 1024
	stunMagic   = 0x2112A442
)

type packet struct {
	buf *[packetSize]byte
	n   int
	ep  conn.Endpoint
}

// Bind wraps wireguard-go's standard bind (batched, offloaded UDP I/O) and
// adds two things: STUN packets arriving on the WireGuard socket are taken
// out of WireGuard's batches and handed to ICE, and peers whose path is a
// local TURN allocation are carried over their ICE connection.
type Bind struct {
	std  conn.Bind
	log  *slog.Logger
	pool sync.Pool
	stun *stunConn

	relayIn chan packet

	mu     sync.Mutex
	port   uint16
	sock4  *net.UDPConn // the standard bind's IPv4 socket, for probes
	probes ProbeHandler
	epoch  chan struct{} // closed by Close; replaced by Open
	relays map[string]*relayEndpoint

	shut     chan struct{}
	shutOnce sync.Once
	wg       sync.WaitGroup
}

// NewBind returns a bind; wireguard-go opens it when the device comes up.
func NewBind(log *slog.Logger) *Bind {
	b := &Bind{
		std:     conn.NewStdNetBind(),
		log:     log,
		relayIn: make(chan packet, queueLength),
		relays:  map[string]*relayEndpoint{},
		shut:    make(chan struct{}),
	}
	b.pool.New = func() any { return new([packetSize]byte) }
	b.stun = &stunConn{b: b, in: make(chan stunPacket, 256)}
	closed := make(chan struct{})
	close(closed)
	b.epoch = closed
	return b
}

// Port is the local UDP port (0 until opened).
func (b *Bind) Port() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return int(b.port)
}

// STUNConn is the PacketConn ICE's UDP mux reads STUN traffic from.
func (b *Bind) STUNConn() net.PacketConn { return b.stun }

// Shutdown stops relay readers and the STUN side; call it after the
// device (which closes the sockets) is closed.
func (b *Bind) Shutdown() {
	b.shutOnce.Do(func() {
		close(b.shut)
		b.mu.Lock()
		for _, r := range b.relays {
			r.c.Close()
		}
		b.mu.Unlock()
	})
	b.wg.Wait()
}

func isSTUN(p []byte) bool {
	return len(p) >= 20 && p[0]&0xc0 == 0 && binary.BigEndian.Uint32(p[4:8]) == stunMagic
}

// Open implements conn.Bind.
func (b *Bind) Open(port uint16) ([]conn.ReceiveFunc, uint16, error) {
	fns, actual, err := b.std.Open(port)
	if err != nil {
		return nil, 0, err
	}
	// WireGuard's and ICE's packets (the STUN mux shares this socket) must
	// never enter the tunnel through a route or an exit node: the mark
	// keeps them on the host's own routes (client/routes). Without the
	// privilege to mark, no routes are installed either.
	_ = b.std.SetMark(sockmark.Mark)
	b.mu.Lock()
	epoch := make(chan struct{})
	b.epoch, b.port = epoch, actual
	b.sock4 = ipv4Socket(b.std) // read right after Open, before any concurrent use
	b.mu.Unlock()
	out := make([]conn.ReceiveFunc, 0, len(fns)+1)
	for _, fn := range fns {
		out = append(out, b.filterSTUN(fn))
	}
	return append(out, b.receiveRelayed(epoch)), actual, nil
}

// filterSTUN removes STUN packets from a received batch and gives them to
// ICE. Batches rarely hold any, so the common case costs one header check
// per packet.
func (b *Bind) filterSTUN(fn conn.ReceiveFunc) conn.ReceiveFunc {
	return func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		for {
			n, err := fn(packets, sizes, eps)
			if err != nil {
				return n, err
			}
			out := 0
			for i := 0; i < n; i++ {
				if p := packets[i][:sizes[i]]; isSTUN(p) || isProbe(p) {
					if ep, ok := eps[i].(*conn.StdNetEndpoint); ok {
						from := netip.AddrPortFrom(ep.Addr().Unmap(), ep.Port())
						if isProbe(p) {
							b.deliverProbe(p, from)
						} else {
							b.stun.deliver(p, from)
						}
					}
					continue
				}
				if out != i {
					// wireguard-go ties each buffer to its slot: move bytes, not slices.
					sizes[out] = copy(packets[out], packets[i][:sizes[i]])
					eps[out] = eps[i]
				}
				out++
			}
			if out > 0 {
				return out, nil
			}
		}
	}
}

func (b *Bind) receiveRelayed(epoch chan struct{}) conn.ReceiveFunc {
	return func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		var p packet
		select {
		case p = <-b.relayIn:
		case <-epoch:
			return 0, net.ErrClosed
		}
		n := 0
		for {
			sizes[n] = copy(packets[n], p.buf[:p.n])
			eps[n] = p.ep
			b.pool.Put(p.buf)
			n++
			if n == len(packets) {
				return n, nil
			}
			select {
			case p = <-b.relayIn:
			default:
				return n, nil
			}
		}
	}
}

// Close implements conn.Bind.
func (b *Bind) Close() error {
	b.mu.Lock()
	select {
	case <-b.epoch:
	default:
		close(b.epoch)
	}
	b.sock4 = nil
	b.mu.Unlock()
	return b.std.Close()
}

// SetMark implements conn.Bind.
func (b *Bind) SetMark(m uint32) error { return b.std.SetMark(m) }

// BatchSize implements conn.Bind.
func (b *Bind) BatchSize() int { return b.std.BatchSize() }

// Send implements conn.Bind.
func (b *Bind) Send(bufs [][]byte, ep conn.Endpoint) error {
	if r, ok := ep.(*relayEndpoint); ok {
		for _, buf := range bufs {
			if _, err := r.c.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	return b.std.Send(bufs, ep)
}

const relayPrefix = "relay-"

// ParseEndpoint implements conn.Bind: "ip:port" is a direct UDP path,
// "relay-NAME" a connection registered with Relay.
func (b *Bind) ParseEndpoint(s string) (conn.Endpoint, error) {
	if strings.HasPrefix(s, relayPrefix) {
		b.mu.Lock()
		defer b.mu.Unlock()
		if r := b.relays[s]; r != nil {
			return r, nil
		}
		return nil, fmt.Errorf("no relay endpoint %q", s)
	}
	return b.std.ParseEndpoint(s)
}

// Relay registers c (an ICE connection whose local side is a TURN
// allocation) as endpoint name and starts reading it. It returns the
// string to configure as the WireGuard peer endpoint.
func (b *Bind) Relay(name string, c net.Conn) string {
	id := relayPrefix + name
	r := &relayEndpoint{id: id, c: c}
	b.mu.Lock()
	if old := b.relays[id]; old != nil {
		if old.c == c {
			b.mu.Unlock()
			return id // already carried: keep its reader
		}
		old.c.Close()
	}
	b.relays[id] = r
	b.mu.Unlock()
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for {
			buf := b.pool.Get().(*[packetSize]byte)
			n, err := c.Read(buf[:])
			if err != nil {
				b.pool.Put(buf)
				return
			}
			if isSTUN(buf[:n]) {
				b.pool.Put(buf)
				continue
			}
			var ep conn.Endpoint = r
			if as := r.as.Load(); as != nil {
				ep = as.ep
			}
			select {
			case b.relayIn <- packet{buf: buf, n: n, ep: ep}:
			default:
				b.pool.Put(buf) // WireGuard is not keeping up: drop like a full socket buffer
			}
		}
	}()
	return id
}

// Unrelay forgets a relay endpoint (its connection is closed by its owner).
func (b *Bind) Unrelay(name string) {
	b.mu.Lock()
	delete(b.relays, relayPrefix+name)
	b.mu.Unlock()
}

// RedirectRelay makes what arrives on relay endpoint name look as if it
// came from endpoint to (as ParseEndpoint reads it), or undoes that when to
// is "". After an upgrade to a direct path the relayed connection stays
// open as a fallback; packets still arriving on it must not move
// WireGuard's endpoint back to the relay.
func (b *Bind) RedirectRelay(name, to string) error {
	b.mu.Lock()
	r := b.relays[relayPrefix+name]
	b.mu.Unlock()
	if r == nil {
		return fmt.Errorf("no relay endpoint %q", name)
	}
	if to == "" {
		r.as.Store(nil)
		return nil
	}
	ep, err := b.ParseEndpoint(to)
	if err != nil {
		return err
	}
	r.as.Store(&endpointBox{ep: ep})
	return nil
}

type endpointBox struct{ ep conn.Endpoint }

type relayEndpoint struct {
	id string
	c  net.Conn
	as atomic.Pointer[endpointBox]
}

func (e *relayEndpoint) ClearSrc()           {}
func (e *relayEndpoint) SrcToString() string { return "" }
func (e *relayEndpoint) DstToString() string { return e.id }
func (e *relayEndpoint) DstToBytes() []byte  { return []byte(e.id) }
func (e *relayEndpoint) DstIP() netip.Addr   { return netip.Addr{} }
func (e *relayEndpoint) SrcIP() netip.Addr   { return netip.Addr{} }

type stunPacket struct {
	data []byte
	addr netip.AddrPort
}

// stunConn is the STUN side of the shared socket, as a net.PacketConn.
type stunConn struct {
	b  *Bind
	in chan stunPacket

	mu       sync.Mutex
	deadline time.Time
}

func (s *stunConn) deliver(p []byte, addr netip.AddrPort) {
	select {
	case s.in <- stunPacket{data: append([]byte(nil), p...), addr: addr}:
	default:
	}
}

func (s *stunConn) ReadFrom(p []byte) (int, net.Addr, error) {
	s.mu.Lock()
	dl := s.deadline
	s.mu.Unlock()
	var timeout <-chan time.Time
	if !dl.IsZero() {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case pk := <-s.in:
		return copy(p, pk.data), net.UDPAddrFromAddrPort(pk.addr), nil
	case <-s.b.shut:
		return 0, nil, net.ErrClosed
	case <-timeout:
		return 0, nil, timeoutError{}
	}
}

func (s *stunConn) WriteTo(p []byte, addr net.Addr) (int, error) {
	ua, ok := addr.(*net.UDPAddr)
	if !ok {
		return 0, fmt.Errorf("not a UDP address: %v", addr)
	}
	ap := ua.AddrPort()
	ep := &conn.StdNetEndpoint{AddrPort: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())}
	if err := s.b.std.Send([][]byte{p}, ep); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (s *stunConn) Close() error        { return nil } // the Bind owns the socket
func (s *stunConn) LocalAddr() net.Addr { return &net.UDPAddr{IP: net.IPv4zero, Port: s.b.Port()} }
func (s *stunConn) SetDeadline(t time.Time) error {
	return s.SetReadDeadline(t)
}
func (s *stunConn) SetReadDeadline(t time.Time) error {
	s.mu.Lock()
	s.deadline = t
	s.mu.Unlock()
	return nil
}
func (s *stunConn) SetWriteDeadline(time.Time) error { return nil }

type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }
