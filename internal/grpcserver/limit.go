package grpcserver

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/wiremesh/wiremesh/internal/metrics"
)

// Defaults for ConnLimits. A NetBird peer holds two or three connections
// (management, signal, relay); a site behind one NAT address may hold
// hundreds of peers.
const (
	DefaultMaxConns          = 65_536
	DefaultMaxConnsPerSource = 4_096
)

// ConnLimits cap the TCP connections a listener keeps open.
type ConnLimits struct {
	// Max is the most connections open at once (0: DefaultMaxConns).
	Max int
	// PerSource is the most from one IP address (0: DefaultMaxConnsPerSource).
	// Loopback addresses are exempt unless CountLoopback: behind a reverse
	// proxy on the same host every client arrives from one.
	PerSource     int
	CountLoopback bool
}

// Listener is a net.Listener that closes, at once, connections beyond its
// limits (counting them in its metrics), so a flood of idle or slow
// connections cannot exhaust file descriptors or memory. Its per-source
// table holds only addresses with connections open.
type Listener struct {
	net.Listener
	lim ConnLimits

	mu       sync.Mutex
	open     int
	bySource map[netip.Addr]int

	accepted, refusedTotal, refusedSource atomic.Uint64
}

// Limit wraps ln.
func Limit(ln net.Listener, lim ConnLimits) *Listener {
	if lim.Max <= 0 {
		lim.Max = DefaultMaxConns
	}
	if lim.PerSource <= 0 {
		lim.PerSource = DefaultMaxConnsPerSource
	}
	return &Listener{Listener: ln, lim: lim, bySource: map[netip.Addr]int{}}
}

// Accept returns the next connection within the limits.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		src := sourceOf(c.RemoteAddr())
		l.mu.Lock()
		switch {
		case l.open >= l.lim.Max:
			l.mu.Unlock()
			l.refusedTotal.Add(1)
			c.Close()
			continue
		case l.bySource[src] >= l.lim.PerSource && (l.lim.CountLoopback || !src.IsLoopback()):
			l.mu.Unlock()
			l.refusedSource.Add(1)
			c.Close()
			continue
		}
		l.open++
		l.bySource[src]++
		l.mu.Unlock()
		l.accepted.Add(1)
		return &limitedConn{Conn: c, l: l, src: src}, nil
	}
}

func (l *Listener) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if l.bySource[src]--; l.bySource[src] <= 0 {
		delete(l.bySource, src)
	}
}

// Open reports the connections open now.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Metrics reports the listener's connections.
func (l *Listener) Metrics() []metrics.Sample {
	l.mu.Lock()
	open, sources := l.open, len(l.bySource)
	l.mu.Unlock()
	return []metrics.Sample{
		{Name: "listener_connections_open", Help: "TCP connections open on the main port", Kind: metrics.Gauge, Value: float64(open)},
		{Name: "listener_connection_sources", Help: "client addresses with connections open", Kind: metrics.Gauge, Value: float64(sources)},
		{Name: "listener_connections_limit", Help: "connection caps (overall, per client address)", Kind: metrics.Gauge, Value: float64(l.lim.Max), Labels: `scope="total"`},
		{Name: "listener_connections_limit", Help: "connection caps (overall, per client address)", Kind: metrics.Gauge, Value: float64(l.lim.PerSource), Labels: `scope="source"`},
		{Name: "listener_connections_accepted_total", Help: "connections accepted", Kind: metrics.Counter, Value: float64(l.accepted.Load())},
		{Name: "listener_connections_refused_total", Help: "connections closed at once for being over a cap", Kind: metrics.Counter, Value: float64(l.refusedTotal.Load()), Labels: `scope="total"`},
		{Name: "listener_connections_refused_total", Help: "connections closed at once for being over a cap", Kind: metrics.Counter, Value: float64(l.refusedSource.Load()), Labels: `scope="source"`},
	}
}

// sourceOf is the client a connection is counted against: its IPv4
// address, or the /64 of its IPv6 address (one host usually holds a whole
// /64, so counting single addresses would not cap it).
func sourceOf(a net.Addr) netip.Addr {
	var ip netip.Addr
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ = netip.AddrFromSlice(ta.IP)
	} else if ap, err := netip.ParseAddrPort(a.String()); err == nil {
		ip = ap.Addr()
	}
	ip = ip.Unmap()
	if ip.Is6() && !ip.IsLoopback() { // loopback stays itself: it is exempt
		if p, err := ip.Prefix(64); err == nil {
			return p.Addr()
		}
	}
	return ip
}

type limitedConn struct {
	net.Conn
	l    *Listener
	src  netip.Addr
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.src) })
	return err
}
