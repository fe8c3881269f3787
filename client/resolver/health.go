package resolver

import (
	"context"
	"net/netip"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Health checks of upstream servers.
const (
	// failsToDown consecutive failures (timeouts, REFUSED) take a server
	// out of rotation.
	failsToDown = 3
	// servfailNamesToDown SERVFAILs for that many distinct names, with no
	// good answer between, do too: one broken name asked again and again
	// (by anyone) says nothing about the server.
	servfailNamesToDown = 5
	// A server out of rotation is probed after minBackoff, then after
	// twice as long each time it still fails, up to maxBackoff.
	minBackoff = 2 * time.Second
	maxBackoff = time.Minute
	// defaultProbeInterval is how often the prober looks for servers due.
	defaultProbeInterval = time.Second
)

// health tracks, per upstream server, whether it answers. A server that
// keeps failing is skipped while the groups have another; the prober
// (Resolver.probeLoop) asks it a question now and then and puts it back
// once it answers.
type health struct {
	now func() time.Time

	mu      sync.Mutex
	servers map[netip.AddrPort]*serverHealth
}

type serverHealth struct {
	fails     int
	servfails map[string]bool // names that got SERVFAIL since the last good answer
	down      bool
	nextProbe time.Time
	backoff   time.Duration
	// probe is the name the probe asks: a match domain of a group the
	// server serves, or the root, which any recursive server answers.
	probe string
}

func newHealth(now func() time.Time) *health {
	return &health{now: now, servers: map[netip.AddrPort]*serverHealth{}}
}

// track makes the tracked servers those of probes (server to probe
// name), keeping what is known about the ones that stay.
func (h *health) track(probes map[netip.AddrPort]string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ap := range h.servers {
		if _, ok := probes[ap]; !ok {
			delete(h.servers, ap)
		}
	}
	for ap, name := range probes {
		s := h.servers[ap]
		if s == nil {
			s = &serverHealth{}
			h.servers[ap] = s
		}
		s.probe = name
	}
}

func (h *health) isDown(ap netip.AddrPort) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.servers[ap]
	return s != nil && s.down
}

// answered records a good answer from ap.
func (h *health) answered(ap netip.AddrPort) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s := h.servers[ap]; s != nil {
		*s = serverHealth{probe: s.probe}
	}
}

// failed records a failure of ap (a timeout or REFUSED) and reports
// whether it took ap out of rotation.
func (h *health) failed(ap netip.AddrPort) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.servers[ap]
	if s == nil || s.down {
		return false
	}
	s.fails++
	if s.fails < failsToDown {
		return false
	}
	h.takeOutLocked(s)
	return true
}

// servfail records a SERVFAIL of ap for name (canonical) and reports
// whether it took ap out of rotation.
func (h *health) servfail(ap netip.AddrPort, name string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.servers[ap]
	if s == nil || s.down {
		return false
	}
	if s.servfails == nil {
		s.servfails = map[string]bool{}
	}
	s.servfails[name] = true
	if len(s.servfails) < servfailNamesToDown {
		return false
	}
	h.takeOutLocked(s)
	return true
}

func (h *health) takeOutLocked(s *serverHealth) {
	s.down, s.backoff = true, minBackoff
	s.servfails = nil
	s.nextProbe = h.now().Add(s.backoff)
}

type probeTarget struct {
	server netip.AddrPort
	name   string
}

// due are the servers out of rotation whose next probe is now.
func (h *health) due() []probeTarget {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []probeTarget
	for ap, s := range h.servers {
		if s.down && !now.Before(s.nextProbe) {
			out = append(out, probeTarget{ap, s.probe})
		}
	}
	return out
}

// probed records a probe's outcome: back in rotation, or the next probe
// later.
func (h *health) probed(ap netip.AddrPort, ok bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.servers[ap]
	switch {
	case s == nil:
	case ok:
		*s = serverHealth{probe: s.probe}
	default:
		s.backoff = min(2*s.backoff, maxBackoff)
		s.nextProbe = h.now().Add(s.backoff)
	}
}

// probeLoop probes the servers out of rotation every interval until ctx
// ends.
func (r *Resolver) probeLoop(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, p := range r.health.due() {
			q := new(dns.Msg)
			q.SetQuestion(p.name, dns.TypeSOA)
			q.RecursionDesired = true
			m, err := r.exchange(ctx, q, p.server, false)
			// Any answer but a failure shows the server serves again.
			ok := err == nil && m.Rcode != dns.RcodeServerFailure && m.Rcode != dns.RcodeRefused
			if ctx.Err() != nil {
				return
			}
			r.health.probed(p.server, ok)
			if ok {
				r.log.Info("DNS server answers again", "server", p.server)
			}
		}
	}
}
