package peer

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"

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
	if dst == nil {
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
			refresh: 20 * time.Millisecond, give: 300 * time.Millisecond, log: log}
	}
	ps[0] = startPortPunch(cfg(true, kk, ko), env(hk, 1), nil)
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
			buf := make([]byte, 16)
			_ = k.result.conn.SetReadDeadline(time.Now().Add(time.Second))
			if n, err := k.result.conn.Read(buf); err != nil || string(buf[:n]) != "wg" {
				t.Fatalf("keeper read %q, %v", buf[:n], err)
			}
			// What arrives counts as a sign of life; silence is measured from it.
			if s := k.result.conn.silentFor(time.Now().Add(directSilence)); s < directSilence || s > directSilence+time.Second {
				t.Fatalf("silent for %v at %v after the last packet", s, directSilence)
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
	got, ok, err := parsePortPunch(a.payload())
	if !ok || err != nil || got != a {
		t.Fatalf("round trip: %+v %v %v, want %+v", got, ok, err, a)
	}
	for _, bad := range []string{
		portPunchPrefix, portPunchPrefix + "192.0.2.7:4242",
		portPunchPrefix + "192.0.2.7:0 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "[2001:db8::1]:5 00000000000000000000000000000000 00000000000000000000000000000000",
		portPunchPrefix + "192.0.2.7:5 00 00000000000000000000000000000000",
		portPunchPrefix + "0.0.0.0:5 00000000000000000000000000000000 00000000000000000000000000000000",
	} {
		if _, ok, err := parsePortPunch(bad); !ok || err == nil {
			t.Errorf("%q: ok=%v err=%v, want an error", bad, ok, err)
		}
	}
	if _, ok, _ := parsePortPunch("candidate:1 1 udp 1 192.0.2.1 5 typ host"); ok {
		t.Error("an ICE candidate taken for a port punch")
	}
}

func FuzzParsePortPunch(f *testing.F) {
	f.Add(portPunchPrefix + "192.0.2.7:4242 0102030405060708090a0b0c0d0e0f10 0102030405060708090a0b0c0d0e0f10")
	f.Add(portPunchPrefix + "x y z")
	f.Add("candidate:1 1 udp 1 192.0.2.1 5 typ host")
	f.Fuzz(func(t *testing.T, s string) {
		a, ok, err := parsePortPunch(s)
		if ok && err == nil {
			b, ok2, err2 := parsePortPunch(a.payload())
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
