package dnsfwd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// sweepEvery is how often expired addresses are looked for while serving.
const sweepEvery = 30 * time.Second

// server is what Serve started: the DNS servers and the expiry sweep.
type server struct {
	mu      sync.Mutex
	servers []*dns.Server
	ctx     context.Context // ends with Close: in-flight lookups stop
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Bind opens UDP and TCP sockets on ap. Port 0 picks one port free for
// both (tests; no pick-close-rebind race: the UDP socket is held while
// the TCP port is tried).
func Bind(ap netip.AddrPort) (*net.UDPConn, *net.TCPListener, error) {
	for range 100 {
		pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		if err != nil {
			return nil, nil, fmt.Errorf("dns forwarder: listen udp %s: %w", ap, err)
		}
		tap := ap
		if ap.Port() == 0 {
			tap = netip.AddrPortFrom(ap.Addr(), uint16(pc.LocalAddr().(*net.UDPAddr).Port))
		}
		ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(tap))
		if err == nil {
			return pc, ln, nil
		}
		pc.Close()
		if ap.Port() != 0 {
			return nil, nil, fmt.Errorf("dns forwarder: listen tcp %s: %w", ap, err)
		}
	}
	return nil, nil, fmt.Errorf("dns forwarder: no port of %s free for both UDP and TCP", ap.Addr())
}

// Listen serves the forwarder over UDP and TCP on ap (the overlay address
// at the forwarder port) until Close. On error nothing is left listening.
func (f *Forwarder) Listen(ap netip.AddrPort) error {
	pc, ln, err := Bind(ap)
	if err != nil {
		return err
	}
	return f.Serve(pc, ln)
}

// Serve serves the forwarder on pc and ln (it owns them from now on,
// closing them on error and at Close) and sweeps expired addresses until
// Close.
func (f *Forwarder) Serve(pc net.PacketConn, ln net.Listener) error {
	s := &f.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		pc.Close()
		ln.Close()
		return errors.New("dns forwarder: already listening")
	}
	h := dns.HandlerFunc(f.serveDNS)
	servers := []*dns.Server{{PacketConn: pc, Handler: h}, {Listener: ln, Handler: h}}
	ctx, cancel := context.WithCancel(context.Background())
	s.servers, s.ctx, s.cancel = servers, ctx, cancel
	for _, srv := range servers {
		started := make(chan struct{})
		srv.NotifyStartedFunc = func() { close(started) }
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			if err := srv.ActivateAndServe(); err != nil {
				f.o.Log.Debug("DNS forwarder server ended", "err", err)
			}
		}()
		<-started
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(sweepEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				f.sweep(ctx)
			}
		}
	}()
	return nil
}

// serveDNS answers one question; over UDP the answer is cut to what the
// client can take. The lookup ends with Close, which then does not wait
// for upstream timeouts.
func (f *Forwarder) serveDNS(w dns.ResponseWriter, q *dns.Msg) {
	f.srv.mu.Lock()
	sctx := f.srv.ctx
	f.srv.mu.Unlock()
	if sctx == nil {
		return // closing
	}
	var src netip.Addr
	udp := false
	switch ra := w.RemoteAddr().(type) {
	case *net.UDPAddr:
		src, udp = ra.AddrPort().Addr(), true
	case *net.TCPAddr:
		src = ra.AddrPort().Addr()
	}
	ctx, cancel := context.WithTimeout(sctx, 2*lookupTimeout)
	m := f.Answer(ctx, src, q)
	cancel()
	if udp {
		size := dns.MinMsgSize
		if o := q.IsEdns0(); o != nil {
			size = max(int(o.UDPSize()), dns.MinMsgSize)
		}
		m.Truncate(size)
	}
	if err := w.WriteMsg(m); err != nil {
		f.o.Log.Debug("DNS forwarder reply", "err", err)
	}
}

// Close stops serving and waits for the servers and the sweep; it is
// idempotent. What was learned stays (Learned still reports it), and the
// forwarder may Listen again.
func (f *Forwarder) Close() {
	s := &f.srv
	s.mu.Lock()
	servers, cancel := s.servers, s.cancel
	s.servers, s.ctx, s.cancel = nil, nil, nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	for _, srv := range servers {
		_ = srv.Shutdown()
	}
	s.wg.Wait()
}
