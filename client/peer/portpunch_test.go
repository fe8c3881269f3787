package peer

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/pion/stun/v4"

	"github.com/wiremesh/wiremesh/internal/key"
)

// natNet models two hosts behind NAT boxes that accept packets to their
// WAN address (TESTBED's hard case): a packet reaching a NAT with no
// outbound entry for its flow leaves a stale entry there for staleLife
// (refreshed by each further packet); while it lives, the NAT's host
// cannot keep its port on that flow and its packets arrive from another
// port, which the remote NAT drops. TTL-1 packets only refresh the
// sender's own entry.
type natNet struct {
	mu        sync.Mutex
	staleLife time.Duration
	hosts     map[netip.AddrPort]*natHost
	// drop, if set, loses the packets it returns true for.
	drop func(from, to netip.AddrPort, b []byte) bool
}

// inject delivers b to the host at to as if it came from from (an
// attacker on the path, or a spoofed source).
func (n *natNet) inject(to, from netip.AddrPort, b []byte) {
	n.mu.Lock()
	h := n.hosts[to]
	n.mu.Unlock()
	h.inbox <- natPacket{from: from, b: append([]byte(nil), b...)}
}

type natHost struct {
	net   *natNet
	addr  netip.AddrPort               // public = local: port preserving
	out   map[netip.AddrPort]natFlow   // outbound entries by destination
	stale map[netip.AddrPort]time.Time // inbound stale entries, last hit
	inbox chan natPacket
	mu    sync.Mutex
	dl    time.Time
	done  chan struct{}
	once  sync.Once
}

type natFlow struct {
	port uint16 // the public source port the flow got
	last time.Time
}

type natPacket struct {
	from netip.AddrPort
	b    []byte
}

func newNatNet(stale time.Duration) *natNet {
	return &natNet{staleLife: stale, hosts: map[netip.AddrPort]*natHost{}}
}

func (n *natNet) host(a string) *natHost {
	h := &natHost{net: n, addr: netip.MustParseAddrPort(a), out: map[netip.AddrPort]natFlow{},
		stale: map[netip.AddrPort]time.Time{}, inbox: make(chan natPacket, 64), done: make(chan struct{})}
	n.mu.Lock()
	n.hosts[h.addr] = h
	n.mu.Unlock()
	return h
}

func (h *natHost) WriteTTL(b []byte, to netip.AddrPort, ttl int) error {
	n := h.net
	n.mu.Lock()
	defer n.mu.Unlock()
	now := time.Now()
	f, ok := h.out[to]
	if ok && now.Sub(f.last) >= n.staleLife {
		ok = false // expired
	}
	if ttl == 1 {
		if ok {
			f.last = now
			h.out[to] = f
		}
		return nil
	}
	if !ok {
		f.port = h.addr.Port()
		if t, stale := h.stale[to]; stale && now.Sub(t) < n.staleLife {
			f.port += 1000 // the random port
		}
	}
	f.last = now
	h.out[to] = f
	from := netip.AddrPortFrom(h.addr.Addr(), f.port)
	dst := n.hosts[to]
	if (n.drop != nil && n.drop(from, to, b)) || dst == nil {
		return nil
	}
	if back, ok := dst.out[from]; ok && back.port == to.Port() && now.Sub(back.last) < n.staleLife {
		select {
		case dst.inbox <- natPacket{from: from, b: append([]byte(nil), b...)}:
		default:
		}
		return nil
	}
	dst.stale[from] = now
	return nil
}

func (h *natHost) ReadFrom(b []byte) (int, net.Addr, error) {
	h.mu.Lock()
	dl := h.dl
	h.mu.Unlock()
	var timeout <-chan time.Time
	if !dl.IsZero() {
		t := time.NewTimer(time.Until(dl))
		defer t.Stop()
		timeout = t.C
	}
	select {
	case p := <-h.inbox:
		return copy(b, p.b), net.UDPAddrFromAddrPort(p.from), nil
	case <-timeout:
		return 0, nil, errors.New("i/o timeout")
	case <-h.done:
		return 0, nil, net.ErrClosed
	}
}

func (h *natHost) WriteTo(b []byte, a net.Addr) (int, error) {
	return len(b), h.WriteTTL(b, a.(*net.UDPAddr).AddrPort(), 0)
}
func (h *natHost) Close() error                     { h.once.Do(func() { close(h.done) }); return nil }
func (h *natHost) LocalAddr() net.Addr              { return net.UDPAddrFromAddrPort(h.addr) }
func (h *natHost) SetDeadline(t time.Time) error    { return h.SetReadDeadline(t) }
func (h *natHost) SetWriteDeadline(time.Time) error { return nil }
func (h *natHost) SetReadDeadline(t time.Time) error {
	h.mu.Lock()
	h.dl = t
	h.mu.Unlock()
	return nil
}

// punchPair runs a keeper and an opener on n, their announcements
// crossing as signal would carry them.
func punchPair(t *testing.T, n *natNet, quiet time.Duration) (keeper, opener *portPunch) {
	return punchPairStale(t, n, quiet, nil)
}

// punchPairStale is punchPair whose keeper first takes stale, an
// announcement of an attempt the opener no longer runs.
func punchPairStale(t *testing.T, n *natNet, quiet time.Duration, stale *portPunchAddr) (keeper, opener *portPunch) {
	t.Helper()
	kk, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	ko, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	hk, ho := n.host("198.51.100.1:40000"), n.host("203.0.113.1:50000")
	var ps [2]*portPunch
	var ready sync.WaitGroup
	ready.Add(1)
	env := func(h *natHost, other int) portPunchEnv {
		return portPunchEnv{
			listen: func() (punchConn, error) { return h, nil },
			mapped: func(context.Context, punchConn) (netip.AddrPort, error) { return h.addr, nil },
			announce: func(_ context.Context, a portPunchAddr) error {
				ready.Wait()
				ps[other].remoteAddr(a)
				return nil
			},
		}
	}
	log := slog.New(slog.DiscardHandler)
	cfg := func(keeper bool, me, remote key.Private) portPunchConfig {
		return portPunchConfig{keeper: keeper, me: me.Public(), remote: remote.Public(), quiet: quiet,
			refresh: 20 * time.Millisecond, give: 300 * time.Millisecond, confirm: 300 * time.Millisecond, log: log}
	}
	ps[0] = startPortPunch(cfg(true, kk, ko), env(hk, 1), nil)
	if stale != nil {
		ps[0].remoteAddr(*stale)
		for deadline := time.Now().Add(2 * time.Second); len(ps[0].remote) > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatal("the keeper did not take the stale announcement")
			}
		}
	}
	ps[1] = startPortPunch(cfg(false, ko, kk), env(ho, 0), nil)
	ready.Done()
	return ps[0], ps[1]
}

func TestPortPunch(t *testing.T) {
	before := runtime.NumGoroutine()
	for _, tc := range []struct {
		name  string
		quiet time.Duration
		want  bool
	}{
		// The opener waits out the stale entry the open probe left.
		{"waits out the stale entry", 1100 * time.Millisecond, true},
		// Too early: the hello leaves from another port and is dropped.
		{"hello too early", 20 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := newNatNet(time.Second)
			k, o := punchPair(t, n, tc.quiet)
			<-k.done
			<-o.done
			if got := k.err == nil && o.err == nil; got != tc.want {
				t.Fatalf("punched = %v (keeper %v, opener %v), want %v", got, k.err, o.err, tc.want)
			}
			if !tc.want {
				if !errors.Is(k.err, errPunchTimeout) || !errors.Is(o.err, errPunchTimeout) {
					t.Fatalf("want timeouts, got keeper %v, opener %v", k.err, o.err)
				}
				return
			}
			// The punched sockets carry data both ways.
			if k.result.remote != netip.MustParseAddrPort("203.0.113.1:50000") || o.result.remote != netip.MustParseAddrPort("198.51.100.1:40000") {
				t.Fatalf("remotes: keeper %v, opener %v", k.result.remote, o.result.remote)
			}
			if _, err := o.result.conn.Write([]byte("wg")); err != nil {
				t.Fatal(err)
			}
			// (After the late confirms, which WireGuard drops as garbage.)
			if got := readUntil(t, k.result.conn, "wg"); got != "wg" {
				t.Fatalf("keeper read %q", got)
			}
			k.result.conn.Close()
			o.result.conn.Close()
		})
	}
	// Every attempt's goroutine has ended.
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if g := runtime.NumGoroutine(); g > before {
		t.Fatalf("%d goroutines left running, %d before", g, before)
	}
}

// readUntil reads c until want or a second passed, skipping late probes;
// it returns what it read last.
func readUntil(t *testing.T, c *boundConn, want string) string {
	t.Helper()
	buf := make([]byte, 2048)
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	defer c.SetReadDeadline(time.Time{})
	for {
		n, err := c.Read(buf)
		if err != nil {
			return err.Error()
		}
		if string(buf[:n]) == want || n != 1+key.Size+16 {
			return string(buf[:n])
		}
	}
}

func TestPortPunchClose(t *testing.T) {
	n := newNatNet(time.Second)
	k, o := punchPair(t, n, time.Hour)
	done := make(chan struct{})
	go func() { k.close(); o.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("close did not stop the attempts")
	}
	if !errors.Is(o.err, context.Canceled) {
		t.Fatalf("opener: %v, want canceled", o.err)
	}
}

func TestParsePortPunch(t *testing.T) {
	a := portPunchAddr{addr: netip.MustParseAddrPort("192.0.2.7:4242")}
	a.token[0], a.echo[15] = 1, 2
	overlay := netip.MustParsePrefix("100.64.0.0/10")
	got, ok, err := parsePortPunch(a.payload(), overlay)
	if !ok || err != nil || got != a {
		t.Fatalf("round trip: %+v %v %v, want %+v", got, ok, err, a)
	}
	// Private WAN addresses (carrier NAT, the lab's 10.200.0.0/24) are
	// what ICE uses too.
	for _, good := range []string{"10.200.0.11:4242", "192.168.1.2:4242", "172.16.0.1:4242"} {
		b := a
		b.addr = netip.MustParseAddrPort(good)
		if got, ok, err := parsePortPunch(b.payload(), overlay); !ok || err != nil || got != b {
			t.Errorf("%s: %+v %v %v", good, got, ok, err)
		}
	}
	for _, bad := range []string{
		portPunchPrefix, portPunchPrefix + "192.0.2.7:4242",
		portPunchPrefix + "192.0.2.7:0 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "[2001:db8::1]:5 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "192.0.2.7:5 00 00000000000000000000000000000000",
		portPunchPrefix + "0.0.0.0:5 00000000000000000000000000000000 00000000000000000000000000000000",
		// Targets ICE would not use, or that reach more than the remote.
		portPunchPrefix + "127.0.0.1:5 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "169.254.1.1:5 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "224.0.0.251:5353 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "239.1.2.3:5 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "255.255.255.255:5 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "100.64.0.7:5 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "[::ffff:127.0.0.1]:5 00000000000000000000000000000000 00000000000000000000000000000000",
	} {
		if _, ok, err := parsePortPunch(bad, overlay); !ok || err == nil {
			t.Errorf("%q: ok=%v err=%v, want an error", bad, ok, err)
		}
	}
	if _, ok, _ := parsePortPunch("candidate:1 1 udp 1 192.0.2.1 5 typ host", overlay); ok {
		t.Error("an ICE candidate taken for a port punch")
	}
}

func FuzzParsePortPunch(f *testing.F) {
	f.Add(portPunchPrefix + "192.0.2.7:4242 0102030405060708090a0b0c0d0e0f10 0102030405060708090a0b0c0d0e0f10")
	f.Add(portPunchPrefix + "x y z")
	f.Add("candidate:1 1 udp 1 192.0.2.1 5 typ host")
	f.Fuzz(func(t *testing.T, s string) {
		overlay := netip.MustParsePrefix("100.64.0.0/10")
		a, ok, err := parsePortPunch(s, overlay)
		if ok && err == nil {
			ip := a.addr.Addr()
			if !usableIP(ip, overlay) || ip.IsMulticast() {
				t.Fatalf("%q: accepted target %s", s, a.addr)
			}
			b, ok2, err2 := parsePortPunch(a.payload(), overlay)
			if !ok2 || err2 != nil || b != a {
				t.Fatalf("%q: reparse %+v %v %v", s, b, ok2, err2)
			}
		}
	})
}

func TestPortPunchBackoff(t *testing.T) {
	for n, want := range map[int]time.Duration{1: 10 * time.Second, 2: 20 * time.Second, 3: 40 * time.Second,
		5: 160 * time.Second, 6: 5 * time.Minute, 40: 5 * time.Minute} {
		if got := portPunchBackoff(n); got != want {
			t.Errorf("after %d failures: %v, want %v", n, got, want)
		}
	}
}

const (
	keeperAddr = "198.51.100.1:40000"
	openerAddr = "203.0.113.1:50000"
)

// A hello replayed from another address (an observer who saw the real
// one, or forged) makes the keeper neither ack nor switch there: it
// punches with the opener's announced address only.
func TestPortPunchReplayedHello(t *testing.T) {
	n := newNatNet(time.Second)
	attacker := netip.MustParseAddrPort("192.0.2.66:6666")
	var once sync.Once
	var answered atomic.Int32
	// The opener's first hello is seen on the path and replayed from the
	// attacker's address before the real one arrives.
	n.drop = func(from, to netip.AddrPort, b []byte) bool {
		if to == attacker {
			answered.Add(1)
			return true
		}
		if to.String() != keeperAddr || len(b) != 1+key.Size+16 || b[0] != probeHello {
			return false
		}
		first := false
		once.Do(func() { first = true })
		if first { // (n.mu is held here)
			n.hosts[to].inbox <- natPacket{from: attacker, b: append([]byte(nil), b...)}
		}
		return first
	}
	k, o := punchPair(t, n, 1100*time.Millisecond)
	<-k.done
	<-o.done
	if k.err != nil || o.err != nil {
		t.Fatalf("keeper %v, opener %v", k.err, o.err)
	}
	if k.result.remote.String() != openerAddr {
		t.Fatalf("keeper switched to %v, want the announced %s", k.result.remote, openerAddr)
	}
	if a := answered.Load(); a != 0 {
		t.Fatalf("the keeper sent %d packets to the replaying address", a)
	}
	k.result.conn.Close()
	o.result.conn.Close()
}

// With every ack lost the opener gives up, and so must the keeper: it
// switches only on the opener's confirm, not on having acked.
func TestPortPunchAcksLost(t *testing.T) {
	n := newNatNet(time.Second)
	n.drop = func(_, _ netip.AddrPort, b []byte) bool {
		return len(b) == 1+key.Size+16 && b[0] == probeAck
	}
	k, o := punchPair(t, n, 1100*time.Millisecond)
	<-k.done
	<-o.done
	if !errors.Is(o.err, errPunchTimeout) {
		t.Fatalf("opener: %v, want a timeout", o.err)
	}
	if !errors.Is(k.err, errPunchUnconfirmed) || k.result != nil {
		t.Fatalf("keeper: %v (switched: %v), want unconfirmed and no switch", k.err, k.result != nil)
	}
}

// With every confirm lost, the opener's first WireGuard packet on the
// path confirms, and the keeper's WireGuard gets it.
func TestPortPunchConfirmedByWireGuard(t *testing.T) {
	n := newNatNet(time.Second)
	n.drop = func(_, _ netip.AddrPort, b []byte) bool {
		return len(b) == 1+key.Size+16 && b[0] == probeConfirm
	}
	k, o := punchPair(t, n, 1100*time.Millisecond)
	<-o.done
	if o.err != nil {
		t.Fatalf("opener: %v", o.err)
	}
	// A garbage packet first: it does not confirm.
	if _, err := o.result.conn.Write([]byte("garbage")); err != nil {
		t.Fatal(err)
	}
	initiation := make([]byte, 148)
	initiation[0] = 1
	if _, err := o.result.conn.Write(initiation); err != nil {
		t.Fatal(err)
	}
	<-k.done
	if k.err != nil {
		t.Fatalf("keeper: %v", k.err)
	}
	if got := readUntil(t, k.result.conn, string(initiation)); got != string(initiation) {
		t.Fatalf("keeper's WireGuard first read %q, want the initiation", got)
	}
	k.result.conn.Close()
	o.result.conn.Close()
}

// An announcement the keeper took from an attempt the opener no longer
// runs is replaced by the opener's newer one.
func TestPortPunchNewerAnnouncement(t *testing.T) {
	n := newNatNet(time.Second)
	stale := portPunchAddr{addr: netip.MustParseAddrPort("203.0.113.1:50001")}
	stale.token[0] = 0xee
	k, o := punchPairStale(t, n, 1100*time.Millisecond, &stale)
	<-k.done
	<-o.done
	if k.err != nil || o.err != nil {
		t.Fatalf("keeper %v, opener %v", k.err, o.err)
	}
	if k.result.remote.String() != openerAddr {
		t.Fatalf("keeper punched %v, want %s", k.result.remote, openerAddr)
	}
	k.result.conn.Close()
	o.result.conn.Close()
}

// Liveness comes from WireGuard's authenticated receive: packets from
// the remote's address that WireGuard does not authenticate (garbage,
// replays, spoofed) keep nothing alive, and authentic traffic that came
// over the relay does not either.
func TestPathLiveness(t *testing.T) {
	n := newNatNet(time.Hour)
	remote := netip.MustParseAddrPort(openerAddr)
	h := n.host(keeperAddr)
	bc := newBoundConn(h, remote, nil)
	defer bc.Close()
	var direct uint64 // what the bind's reader counts for the punched path
	deliver := func(from netip.AddrPort, size int) {
		n.inject(h.addr, from, make([]byte, size))
		_ = bc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		buf := make([]byte, 2048)
		for {
			m, err := bc.Read(buf)
			if err != nil {
				return
			}
			direct += uint64(m)
		}
	}
	t0 := time.Now()
	l := newPathLiveness(t0, counters{auth: 1000, relay: 500})
	step := directCheckEvery
	at := func(i int) time.Time { return t0.Add(time.Duration(i) * step) }
	var auth, relay uint64 = 1000, 500
	i := 0
	check := func(wantAlive bool, what string) {
		t.Helper()
		i++
		silent := l.observe(at(i), counters{auth: auth, relay: relay, direct: direct})
		if alive := silent == 0; alive != wantAlive {
			t.Fatalf("%s: silent %v, want alive=%v", what, silent, wantAlive)
		}
	}
	// Authentic keepalives over the punched path.
	deliver(remote, 32)
	auth += 32
	check(true, "authentic keepalive on the path")
	// Garbage from the remote's address; from elsewhere is not even read.
	deliver(remote, 100)
	deliver(netip.MustParseAddrPort("192.0.2.66:6666"), 100)
	check(false, "garbage from the remote's address")
	if direct != 32+100 {
		t.Fatalf("the punched path delivered %d bytes, want 132 (nothing from elsewhere)", direct)
	}
	// Authentic traffic over the relay, garbage on the path.
	relay += 200
	auth += 200
	deliver(remote, 64)
	check(false, "authentic bytes all from the relay")
	// Only garbage for directSilence: dead.
	for ; time.Duration(i)*step < directSilence+step; deliver(remote, 32) {
		check(false, "garbage")
	}
	if s := l.observe(at(i+1), counters{auth: auth, relay: relay, direct: direct}); s < directSilence {
		t.Fatalf("silent %v after garbage only, want at least %v", s, directSilence)
	}
	// A recreated relay connection restarts its counter; authentic bytes
	// beyond what it delivered, with the path delivering, are alive.
	i++
	relay = 10
	auth += 50
	deliver(remote, 40)
	check(true, "after the relay's counter restarted")
}

// The remote's announcements do not start attempts during our back-off;
// the newest is kept and answered if our next attempt starts in time.
func TestPortPunchAdmit(t *testing.T) {
	var pp portPunchState
	now := time.Now()
	a1 := portPunchAddr{addr: netip.MustParseAddrPort("192.0.2.1:1")}
	a2 := portPunchAddr{addr: netip.MustParseAddrPort("192.0.2.1:2")}
	if !pp.admit(now, a1) {
		t.Fatal("no back-off: not admitted")
	}
	pp.nextAt = now.Add(portPunchBackoff(3))
	if pp.admit(now, a1) || pp.admit(now.Add(time.Second), a2) {
		t.Fatal("admitted while backing off")
	}
	if a, ok := pp.takePending(now.Add(10*time.Second), 42*time.Second); !ok || a != a2 {
		t.Fatalf("pending %+v %v, want the newest", a, ok)
	}
	if _, ok := pp.takePending(now.Add(10*time.Second), 42*time.Second); ok {
		t.Fatal("pending taken twice")
	}
	pp.admit(now, a1)
	if _, ok := pp.takePending(now.Add(43*time.Second), 42*time.Second); ok {
		t.Fatal("a stale pending announcement taken")
	}
	if !pp.admit(pp.nextAt, a1) {
		t.Fatal("not admitted once the back-off ended")
	}
}

// STUN answers count only from the server asked: a forged answer with
// the right transaction from elsewhere is ignored.
func TestStunMappedOnlyFromServer(t *testing.T) {
	server, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	forger, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer forger.Close()
	answer := func(c *net.UDPConn, to *net.UDPAddr, req *stun.Message, ip net.IP, port int) {
		res := stun.MustBuild(stun.NewTransactionIDSetter(req.TransactionID), stun.BindingSuccess,
			&stun.XORMappedAddress{IP: ip, Port: port})
		if _, err := c.WriteToUDP(res.Raw, to); err != nil {
			t.Error(err)
		}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 1500)
		n, from, err := server.ReadFromUDP(buf)
		if err != nil {
			return
		}
		req := &stun.Message{Raw: buf[:n]}
		if err := req.Decode(); err != nil {
			t.Error(err)
			return
		}
		answer(forger, from, req, net.IPv4(192, 0, 2, 66), 6666)
		time.Sleep(50 * time.Millisecond)
		answer(server, from, req, net.IPv4(198, 51, 100, 7), 4242)
	}()
	pc, err := listenPunch()
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	uri, err := stun.ParseURI("stun:" + server.LocalAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	got, err := stunMapped(func() []*stun.URI { return []*stun.URI{uri} })(context.Background(), pc)
	<-done
	if err != nil || got != netip.MustParseAddrPort("198.51.100.7:4242") {
		t.Fatalf("mapped %v, %v; want the server's answer 198.51.100.7:4242", got, err)
	}
}
