package dnsfwd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// sweepEvery is how often expired addresses are looked for while serving.
const sweepEvery = 30 * time.Second

// server is what Listen started: the DNS servers and the expiry sweep.
type server struct {
	mu      sync.Mutex
	servers []*dns.Server
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// Listen serves the forwarder over UDP and TCP on each of addrs (the
// overlay address at the forwarder port, and at the legacy port for old
// clients) and sweeps expired addresses until Close. On error nothing is
// left listening.
func (f *Forwarder) Listen(addrs ...netip.AddrPort) error {
	s := &f.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("dns forwarder: already listening")
	}
	var servers []*dns.Server
	var opened []io.Closer
	fail := func(err error) error {
		// Not started yet: the servers would not close their sockets.
		for _, c := range opened {
			_ = c.Close()
		}
		return err
	}
	for _, ap := range addrs {
		pc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(ap))
		if err != nil {
			return fail(fmt.Errorf("dns forwarder: listen udp %s: %w", ap, err))
		}
		ln, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(ap))
		if err != nil {
			pc.Close()
			return fail(fmt.Errorf("dns forwarder: listen tcp %s: %w", ap, err))
		}
		opened = append(opened, pc, ln)
		h := dns.HandlerFunc(f.serveDNS)
		servers = append(servers, &dns.Server{PacketConn: pc, Handler: h}, &dns.Server{Listener: ln, Handler: h})
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.servers, s.cancel = servers, cancel
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
				f.Sweep()
			}
		}
	}()
	return nil
}

// serveDNS answers one question; over UDP the answer is cut to what the
// client can take.
func (f *Forwarder) serveDNS(w dns.ResponseWriter, q *dns.Msg) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*lookupTimeout)
	m := f.Answer(ctx, q)
	cancel()
	if _, udp := w.RemoteAddr().(*net.UDPAddr); udp {
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
// idempotent. What was learned stays (Learned still reports it).
func (f *Forwarder) Close() {
	s := &f.srv
	s.mu.Lock()
	servers, cancel := s.servers, s.cancel
	s.servers, s.cancel = nil, nil
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
