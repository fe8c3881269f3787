package peer

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
)

// Hole punching on fresh ports, for NAT boxes that accept packets sent to
// their own WAN address (TESTBED's hard case, measured with conntrack in
// the lab):
//
//   - The first direct packet of a flow that reaches such a NAT before the
//     NAT's own host sent on that flow leaves a confirmed, unreplied
//     conntrack entry there. The host's later packet on the same flow then
//     cannot keep its source port and gets a random one, which the other
//     NAT drops. ICE's simultaneous checks always lose this race on one
//     side (who wins is decided by microseconds), and the entry lives on
//     for 30 s after the last packet that refreshed it.
//   - Linux gives a new flow from a local port the mapping of that port's
//     newest flow. Once one flow of the WireGuard port went random (ICE's
//     checks, a TURN permission), every later flow from that port tends to
//     reuse the random port, so the old schedule of punch.go, which probes
//     from the WireGuard port, mostly misses.
//   - A low TTL cannot open our NAT without reaching theirs when the two
//     NATs are one hop apart (TTL 1 dies before our NAT creates its
//     mapping, TTL 2 already reaches the remote NAT): the wait cannot be
//     skipped there.
//
// So both sides open a fresh UDP socket whose mappings nothing else has
// touched, learn its public address by STUN and exchange it through
// signal (sealed end to end, with a random token each: together they key
// the probes' MAC). The keeper (controlling side) sends one open probe,
// which creates its mapping and, at the remote NAT, the one stale entry
// of the attempt; it then keeps its mapping alive with TTL-1 probes that
// die at its own NAT. It tells the opener only after the open probe left,
// and the opener waits PunchQuiet (the stale entry's lifetime) from then
// before its hello: the hello keeps its port, matches the keeper's
// mapping, and the keeper acks. Both hand the socket to WireGuard as the
// peer's direct path; the relay stays open as the fallback.
//
// The message travels as a CANDIDATE whose payload starts with
// portPunchPrefix, sent only to agents that announced WiremeshTurnPunch.

const portPunchPrefix = "wiremesh-punch "

// portPunchAddr is a side's fresh socket as announced through signal.
type portPunchAddr struct {
	addr  netip.AddrPort
	token [16]byte
	// echo is the opener's token in the keeper's announcement: the opener
	// ignores an answer to an earlier attempt of its own.
	echo [16]byte
}

func (a portPunchAddr) payload() string {
	return portPunchPrefix + a.addr.String() + " " + hex.EncodeToString(a.token[:]) + " " + hex.EncodeToString(a.echo[:])
}

// parsePortPunch reads a CANDIDATE payload; ok is false when it is not a
// port-punch announcement, err set when it is one but malformed.
func parsePortPunch(payload string) (a portPunchAddr, ok bool, err error) {
	rest, ok := strings.CutPrefix(payload, portPunchPrefix)
	if !ok {
		return a, false, nil
	}
	f := strings.Fields(rest)
	if len(f) != 3 {
		return a, true, fmt.Errorf("port punch %q: want address, token and echo", payload)
	}
	addr := f[0]
	if a.addr, err = netip.ParseAddrPort(addr); err != nil {
		return a, true, fmt.Errorf("port punch address: %w", err)
	}
	if !a.addr.Addr().Unmap().Is4() || a.addr.Port() == 0 || a.addr.Addr().IsUnspecified() {
		return a, true, fmt.Errorf("port punch address %s: want a routable IPv4 address and a port", a.addr)
	}
	a.addr = netip.AddrPortFrom(a.addr.Addr().Unmap(), a.addr.Port())
	for i, dst := range [][]byte{a.token[:], a.echo[:]} {
		b, err := hex.DecodeString(f[1+i])
		if err != nil || len(b) != len(dst) {
			return a, true, fmt.Errorf("port punch token %q: want %d hex bytes", f[1+i], len(dst))
		}
		copy(dst, b)
	}
	return a, true, nil
}

// punchConn is the fresh socket: a UDP socket that can send with a chosen
// TTL (0: the system's default).
type punchConn interface {
	net.PacketConn
	WriteTTL(p []byte, to netip.AddrPort, ttl int) error
}

// portPunchEnv is what a port punch needs from the outside world; tests
// replace it with an in-memory network.
type portPunchEnv struct {
	listen func() (punchConn, error)
	// mapped returns the socket's public address (STUN).
	mapped func(ctx context.Context, pc punchConn) (netip.AddrPort, error)
	// announce sends our fresh address to the remote through signal.
	announce func(ctx context.Context, a portPunchAddr) error
}

// portPunchConfig drives one attempt.
type portPunchConfig struct {
	keeper     bool
	me, remote key.Public
	quiet      time.Duration // the stale entry's lifetime, plus a margin
	refresh    time.Duration // TTL-1 probes keeping the keeper's mapping
	give       time.Duration // how long the keeper waits for the hello after quiet
	log        *slog.Logger
}

// portPunch is one attempt; its goroutine is owned by the Conn's loop,
// which stops it with close.
type portPunch struct {
	cfg    portPunchConfig
	env    portPunchEnv
	remote chan portPunchAddr // the remote's announcement, buffered
	cancel context.CancelFunc
	done   chan struct{}

	// set once, before done closes
	result *directPath
	err    error
}

// directPath is a punched path: the socket, bound to the remote's address.
type directPath struct {
	conn   *boundConn
	remote netip.AddrPort
	after  time.Duration
}

// errPunchTimeout: no hello (keeper) or ack (opener) in time.
var errPunchTimeout = errors.New("port punch: no answer from the remote in time")

// startPortPunch starts an attempt; report, if set, is called from the
// attempt's goroutine when it ends by itself, and must give up when ctx
// (cancelled by close) is done.
func startPortPunch(cfg portPunchConfig, env portPunchEnv, report func(ctx context.Context, p *portPunch)) *portPunch {
	ctx, cancel := context.WithCancel(context.Background())
	p := &portPunch{cfg: cfg, env: env, remote: make(chan portPunchAddr, 1), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.result, p.err = p.run(ctx)
		if report != nil && ctx.Err() == nil {
			report(ctx, p)
		}
	}()
	return p
}

// remoteAddr hands the remote's announcement to the attempt.
func (p *portPunch) remoteAddr(a portPunchAddr) {
	// The newest announcement replaces one not yet taken (one producer:
	// the Conn's loop).
	select {
	case <-p.remote:
	default:
	}
	p.remote <- a
}

// close stops the attempt and waits for it; a punched socket not taken
// (result) is closed.
func (p *portPunch) close() {
	p.cancel()
	<-p.done
}

func (p *portPunch) run(ctx context.Context) (*directPath, error) {
	started := time.Now()
	pc, err := p.env.listen()
	if err != nil {
		return nil, fmt.Errorf("port punch socket: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			pc.Close()
		}
	}()
	stop := context.AfterFunc(ctx, func() { _ = pc.SetReadDeadline(time.Now()) })
	defer stop()
	pub, err := p.env.mapped(ctx, pc)
	if err != nil {
		return nil, fmt.Errorf("port punch: public address of the fresh socket: %w", err)
	}
	me := portPunchAddr{addr: pub}
	_, _ = rand.Read(me.token[:])

	var remote portPunchAddr
	if !p.cfg.keeper {
		if err := p.env.announce(ctx, me); err != nil {
			return nil, fmt.Errorf("port punch: announce: %w", err)
		}
	}
	// The remote announces when its attempt starts; one that never comes
	// (the remote went direct by ICE, or left) ends the attempt.
	wait := time.NewTimer(2*p.cfg.quiet + p.cfg.give)
	defer wait.Stop()
	for {
		select {
		case remote = <-p.remote:
		case <-wait.C:
			return nil, fmt.Errorf("port punch: the remote did not announce its fresh port: %w", errPunchTimeout)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if p.cfg.keeper || remote.echo == me.token {
			break
		}
		p.cfg.log.Debug("port punch: ignoring the answer to an earlier attempt", "addr", remote.addr)
	}
	me.echo = remote.token
	k := portPunchKey(me.token, remote.token)
	var from netip.AddrPort
	if p.cfg.keeper {
		from, err = p.keep(ctx, pc, k, me, remote)
	} else {
		from, err = p.open(ctx, pc, k, remote)
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return &directPath{conn: newBoundConn(pc, from), remote: from, after: time.Since(started)}, nil
}

// keep is the keeper's side: open, announce, refresh, answer the hello.
func (p *portPunch) keep(ctx context.Context, pc punchConn, k []byte, me, remote portPunchAddr) (netip.AddrPort, error) {
	if err := pc.WriteTTL(p.probe(k, probeOpen), remote.addr, 0); err != nil {
		return netip.AddrPort{}, fmt.Errorf("port punch open: %w", err)
	}
	// Announced after the open probe left: the opener counts its wait
	// from the announcement.
	if err := p.env.announce(ctx, me); err != nil {
		return netip.AddrPort{}, fmt.Errorf("port punch: announce: %w", err)
	}
	deadline := time.Now().Add(p.cfg.quiet + p.cfg.give)
	for time.Now().Before(deadline) {
		from, kind, err := p.read(ctx, pc, k, time.Now().Add(p.cfg.refresh))
		if ctx.Err() != nil {
			return netip.AddrPort{}, ctx.Err()
		}
		if err == nil && kind == probeHello {
			for i := 0; i < 3; i++ {
				if err := pc.WriteTTL(p.probe(k, probeAck), from, 0); err != nil {
					return netip.AddrPort{}, fmt.Errorf("port punch ack: %w", err)
				}
			}
			return from, nil
		}
		if err := pc.WriteTTL(p.probe(k, probeOpen), remote.addr, 1); err != nil && !errors.Is(err, errNoTTLHere) {
			return netip.AddrPort{}, fmt.Errorf("port punch refresh: %w", err)
		}
	}
	return netip.AddrPort{}, errPunchTimeout
}

// open is the opener's side: wait out the stale entry, hello, await the ack.
func (p *portPunch) open(ctx context.Context, pc punchConn, k []byte, remote portPunchAddr) (netip.AddrPort, error) {
	t := time.NewTimer(p.cfg.quiet)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return netip.AddrPort{}, ctx.Err()
	}
	// A few hellos in a row: if the first passes the NATs, the next do
	// too; if it does not, its random mapping is the same for all.
	deadline := time.Now().Add(3 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if i < 3 {
			if err := pc.WriteTTL(p.probe(k, probeHello), remote.addr, 0); err != nil {
				return netip.AddrPort{}, fmt.Errorf("port punch hello: %w", err)
			}
		}
		from, kind, err := p.read(ctx, pc, k, time.Now().Add(200*time.Millisecond))
		if ctx.Err() != nil {
			return netip.AddrPort{}, ctx.Err()
		}
		if err == nil && kind == probeAck && from == remote.addr {
			return from, nil
		}
	}
	return netip.AddrPort{}, errPunchTimeout
}

// read returns the next authentic probe from the remote, or an error at
// the deadline.
func (p *portPunch) read(ctx context.Context, pc punchConn, k []byte, deadline time.Time) (netip.AddrPort, byte, error) {
	_ = pc.SetReadDeadline(deadline)
	if err := ctx.Err(); err != nil {
		return netip.AddrPort{}, 0, err // the deadline just set may have undone the cancel's
	}
	buf := make([]byte, 256)
	for {
		n, addr, err := pc.ReadFrom(buf)
		if err != nil {
			return netip.AddrPort{}, 0, err
		}
		ua, ok := addr.(*net.UDPAddr)
		if !ok {
			continue
		}
		kind, ok := p.check(k, buf[:n])
		if !ok {
			continue
		}
		return ua.AddrPort(), kind, nil
	}
}

// probe is kind, our key and a MAC over both keyed by the two tokens.
func (p *portPunch) probe(k []byte, kind byte) []byte {
	body := append([]byte{kind}, p.cfg.me[:]...)
	return append(body, probeMAC(k, kind, p.cfg.me)...)
}

func (p *portPunch) check(k []byte, b []byte) (byte, bool) {
	if len(b) != 1+key.Size+16 {
		return 0, false
	}
	var sender key.Public
	copy(sender[:], b[1:1+key.Size])
	if sender != p.cfg.remote || !hmac.Equal(b[1+key.Size:], probeMAC(k, b[0], sender)) {
		return 0, false
	}
	return b[0], true
}

// portPunchKey keys the probes' MAC with both tokens, in a fixed order.
func portPunchKey(a, b [16]byte) []byte {
	x, y := a[:], b[:]
	if string(x) > string(y) {
		x, y = y, x
	}
	sum := sha256.Sum256(append(append([]byte("wiremesh port punch\x00"), x...), y...))
	return sum[:]
}

// boundConn is the punched socket as WireGuard's net.Conn to the remote:
// it reads only what comes from the remote (late probes included, which
// the bind passes to WireGuard as garbage it drops) and writes to it.
type boundConn struct {
	pc     punchConn
	remote netip.AddrPort
	once   sync.Once
	// heard is when the last packet from the remote arrived (unix nanos):
	// WireGuard's keepalives make silence mean a dead path.
	heard atomic.Int64
}

func newBoundConn(pc punchConn, remote netip.AddrPort) *boundConn {
	_ = pc.SetReadDeadline(time.Time{})
	c := &boundConn{pc: pc, remote: remote}
	c.heard.Store(time.Now().UnixNano())
	return c
}

// silentFor is how long nothing came from the remote.
func (c *boundConn) silentFor(now time.Time) time.Duration {
	return now.Sub(time.Unix(0, c.heard.Load()))
}

func (c *boundConn) Read(b []byte) (int, error) {
	for {
		n, addr, err := c.pc.ReadFrom(b)
		if err != nil {
			return n, err
		}
		if ua, ok := addr.(*net.UDPAddr); ok && ua.AddrPort() == c.remote {
			c.heard.Store(time.Now().UnixNano())
			return n, nil
		}
	}
}

func (c *boundConn) Write(b []byte) (int, error) {
	return c.pc.WriteTo(b, net.UDPAddrFromAddrPort(c.remote))
}

func (c *boundConn) Close() error {
	var err error
	c.once.Do(func() { err = c.pc.Close() })
	return err
}

func (c *boundConn) LocalAddr() net.Addr                { return c.pc.LocalAddr() }
func (c *boundConn) RemoteAddr() net.Addr               { return net.UDPAddrFromAddrPort(c.remote) }
func (c *boundConn) SetDeadline(t time.Time) error      { return c.pc.SetDeadline(t) }
func (c *boundConn) SetReadDeadline(t time.Time) error  { return c.pc.SetReadDeadline(t) }
func (c *boundConn) SetWriteDeadline(t time.Time) error { return c.pc.SetWriteDeadline(t) }
