// Package wg runs the WireGuard data plane of the agent: a wireguard-go
// device on a TUN interface, and a conn.Bind that shares one UDP socket
// between WireGuard and ICE. STUN packets on that socket go to ICE (so the
// server-reflexive address ICE learns is the one WireGuard uses), everything
// else to WireGuard; peers reached only through a TURN allocation are
// carried over their ICE connection instead. Kernel WireGuard is not driven
// here.
package wg

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"

	"golang.zx2c4.com/wireguard/conn"
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

// Bind is the shared socket. It lives as long as the agent's interface,
// independent of wireguard-go's Open/Close cycles, because ICE keeps using it.
type Bind struct {
	sock *net.UDPConn
	log  *slog.Logger
	pool sync.Pool

	wgIn chan packet
	stun *stunConn

	mu     sync.Mutex
	epoch  chan struct{} // closed by Close; replaced by Open
	relays map[string]*relayEndpoint

	shut     chan struct{}
	shutOnce sync.Once
	wg       sync.WaitGroup
}

// NewBind listens on UDP port (0 picks one) on all IPv4 addresses.
func NewBind(port int, log *slog.Logger) (*Bind, error) {
	sock, err := net.ListenUDP("udp4", &net.UDPAddr{Port: port})
	if err != nil && port != 0 {
		// The official client falls back to a free port when 51820 is taken.
		log.Warn("WireGuard port busy, using a random one", "port", port, "err", err)
		sock, err = net.ListenUDP("udp4", &net.UDPAddr{})
	}
	if err != nil {
		return nil, fmt.Errorf("listen udp: %w", err)
	}
	_ = sock.SetReadBuffer(4 << 20)
	_ = sock.SetWriteBuffer(4 << 20)
	b := &Bind{
		sock:   sock,
		log:    log,
		wgIn:   make(chan packet, queueLength),
		relays: map[string]*relayEndpoint{},
		shut:   make(chan struct{}),
	}
	b.pool.New = func() any { return new([packetSize]byte) }
	b.stun = &stunConn{b: b, in: make(chan stunPacket, 256)}
	closed := make(chan struct{})
	close(closed)
	b.epoch = closed
	b.wg.Add(1)
	go b.readLoop()
	return b, nil
}

// Port is the local UDP port.
func (b *Bind) Port() int { return b.sock.LocalAddr().(*net.UDPAddr).Port }

// STUNConn is the PacketConn ICE's UDP mux reads STUN traffic from.
func (b *Bind) STUNConn() net.PacketConn { return b.stun }

// Shutdown closes the socket and stops every reader.
func (b *Bind) Shutdown() {
	b.shutOnce.Do(func() {
		close(b.shut)
		b.sock.Close()
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

func (b *Bind) readLoop() {
	defer b.wg.Done()
	for {
		buf := b.pool.Get().(*[packetSize]byte)
		n, addr, err := b.sock.ReadFromUDPAddrPort(buf[:])
		if err != nil {
			b.pool.Put(buf)
			select {
			case <-b.shut:
				return
			default:
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		addr = netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port())
		if isSTUN(buf[:n]) {
			b.stun.deliver(buf[:n], addr)
			b.pool.Put(buf)
			continue
		}
		b.enqueue(packet{buf: buf, n: n, ep: &udpEndpoint{addr: addr}})
	}
}

func (b *Bind) enqueue(p packet) {
	select {
	case b.wgIn <- p:
	default:
		b.pool.Put(p.buf) // WireGuard is not keeping up: drop like a full socket buffer
	}
}

// Open implements conn.Bind. The socket is already open; this starts a new
// receive epoch for wireguard-go.
func (b *Bind) Open(uint16) ([]conn.ReceiveFunc, uint16, error) {
	b.mu.Lock()
	select {
	case <-b.epoch:
	default:
		b.mu.Unlock()
		return nil, 0, conn.ErrBindAlreadyOpen
	}
	epoch := make(chan struct{})
	b.epoch = epoch
	b.mu.Unlock()
	return []conn.ReceiveFunc{b.receiveFunc(epoch)}, uint16(b.Port()), nil
}

func (b *Bind) receiveFunc(epoch chan struct{}) conn.ReceiveFunc {
	return func(packets [][]byte, sizes []int, eps []conn.Endpoint) (int, error) {
		var p packet
		select {
		case p = <-b.wgIn:
		case <-epoch:
			return 0, net.ErrClosed
		case <-b.shut:
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
			case p = <-b.wgIn:
			default:
				return n, nil
			}
		}
	}
}

// Close implements conn.Bind: it ends the receive epoch, not the socket.
func (b *Bind) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	select {
	case <-b.epoch:
	default:
		close(b.epoch)
	}
	return nil
}

// SetMark implements conn.Bind (no fwmark routing here).
func (b *Bind) SetMark(uint32) error { return nil }

// BatchSize implements conn.Bind.
func (b *Bind) BatchSize() int { return 32 }

// Send implements conn.Bind.
func (b *Bind) Send(bufs [][]byte, ep conn.Endpoint) error {
	switch e := ep.(type) {
	case *udpEndpoint:
		for _, buf := range bufs {
			if _, err := b.sock.WriteToUDPAddrPort(buf, e.addr); err != nil {
				return err
			}
		}
		return nil
	case *relayEndpoint:
		for _, buf := range bufs {
			if _, err := e.c.Write(buf); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown endpoint type %T", ep)
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
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil, err
	}
	return &udpEndpoint{addr: ap}, nil
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
			b.enqueue(packet{buf: buf, n: n, ep: r})
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

type udpEndpoint struct{ addr netip.AddrPort }

func (e *udpEndpoint) ClearSrc()           {}
func (e *udpEndpoint) SrcToString() string { return "" }
func (e *udpEndpoint) DstToString() string { return e.addr.String() }
func (e *udpEndpoint) DstToBytes() []byte  { b, _ := e.addr.MarshalBinary(); return b }
func (e *udpEndpoint) DstIP() netip.Addr   { return e.addr.Addr() }
func (e *udpEndpoint) SrcIP() netip.Addr   { return netip.Addr{} }

type relayEndpoint struct {
	id string
	c  net.Conn
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
	return s.b.sock.WriteToUDP(p, ua)
}

func (s *stunConn) Close() error        { return nil } // the Bind owns the socket
func (s *stunConn) LocalAddr() net.Addr { return s.b.sock.LocalAddr() }
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
