package resolver

import (
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Admission: who may ask, and how much at once.

// Concurrency caps (Options leave them zero for these): a client flooding
// the resolver gets REFUSED once it has this many questions in flight,
// and so does everyone once the resolver as a whole has.
const (
	defaultPerSource = 64
	defaultTotal     = 1024
)

// limiter counts questions in flight per source address.
type limiter struct {
	perSource, total int

	mu       sync.Mutex
	inflight map[netip.Addr]int
	sum      int
}

func newLimiter(perSource, total int) *limiter {
	return &limiter{perSource: perSource, total: total, inflight: map[netip.Addr]int{}}
}

// acquire takes a slot for src; false when src or everyone is at the cap.
func (l *limiter) acquire(src netip.Addr) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.sum >= l.total || l.inflight[src] >= l.perSource {
		return false
	}
	l.inflight[src]++
	l.sum++
	return true
}

func (l *limiter) release(src netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inflight[src]--; l.inflight[src] <= 0 {
		delete(l.inflight, src)
	}
	l.sum--
}

// localRefresh is how often, at most, the host's own addresses are read
// again to admit a source not known to be local.
const localRefresh = time.Second

// sources decides who may ask over UDP: the overlay and this host.
type sources struct {
	overlay netip.Prefix
	list    func() ([]netip.Addr, error)
	now     func() time.Time

	mu    sync.Mutex
	local map[netip.Addr]bool
	read  time.Time // when local was read; zero: never
}

func newSources(overlay netip.Prefix, list func() ([]netip.Addr, error), now func() time.Time) *sources {
	return &sources{overlay: overlay.Masked(), list: list, now: now}
}

// allowed reports whether src may ask over UDP. An address not known to
// be local has the list read again, at most once per localRefresh, so
// that an address the host just gained is admitted soon while a flood
// of spoofed sources costs one read a second.
func (s *sources) allowed(src netip.Addr) bool {
	src = src.Unmap()
	if !src.IsValid() {
		return false
	}
	if src.IsLoopback() || (s.overlay.IsValid() && s.overlay.Contains(src)) {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local[src] {
		return true
	}
	now := s.now()
	if !s.read.IsZero() && now.Sub(s.read) < localRefresh && !now.Before(s.read) {
		return false
	}
	s.read = now
	addrs, err := s.list()
	if err != nil {
		return false
	}
	s.local = map[netip.Addr]bool{}
	for _, a := range addrs {
		s.local[a.Unmap()] = true
	}
	return s.local[src]
}

// interfaceAddrs are the addresses of this host's interfaces.
func interfaceAddrs() ([]netip.Addr, error) {
	ifas, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("interface addresses: %w", err)
	}
	var out []netip.Addr
	for _, ifa := range ifas {
		if n, ok := ifa.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok {
				out = append(out, a.Unmap())
			}
		}
	}
	return out, nil
}
