package acl

import (
	"fmt"
	"net"
	"net/netip"
	"time"
)

// hostEvery is how old the host's address list may get before a packet
// refreshes it. Addresses appear at runtime (DHCP, docker bridges, VPNs);
// until the refresh, a new one is judged as another host's, which only
// matters on a routing peer and only for that window.
const hostEvery = 2 * time.Second

// hostAddrs is a snapshot of the host's own addresses.
type hostAddrs struct {
	at    time.Time
	addrs map[netip.Addr]struct{}
}

// osHostAddrs lists the addresses of every interface of this host.
func osHostAddrs() ([]netip.Addr, error) {
	as, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("list the host's addresses: %w", err)
	}
	out := make([]netip.Addr, 0, len(as))
	for _, a := range as {
		n, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		if ip, ok := netip.AddrFromSlice(n.IP); ok {
			out = append(out, ip.Unmap())
		}
	}
	return out, nil
}

// RefreshHostAddrs reads the host's addresses now (the engine calls it on
// each network map; packets refresh it when older than hostEvery). On
// failure the previous list stays.
func (f *Filter) RefreshHostAddrs() {
	as, err := f.hostSrc()
	if err != nil {
		if f.log != nil {
			f.log.Warn("packet filter: cannot refresh the host's addresses, keeping the previous list", "err", err)
		}
		// Retry after hostEvery, not on every packet.
		if old := f.hosts.Load(); old != nil {
			f.hosts.Store(&hostAddrs{at: f.now(), addrs: old.addrs})
		} else {
			f.hosts.Store(&hostAddrs{at: f.now()})
		}
		return
	}
	h := &hostAddrs{at: f.now(), addrs: make(map[netip.Addr]struct{}, len(as))}
	for _, a := range as {
		h.addrs[a.Unmap().WithZone("")] = struct{}{}
	}
	f.hosts.Store(h)
}

// isHost reports whether a is one of this host's own addresses: traffic
// to it is delivered locally by the kernel, so the peer rules judge it,
// never the route rules.
func (f *Filter) isHost(a netip.Addr) bool {
	h := f.hosts.Load()
	if h == nil || f.now().Sub(h.at) > hostEvery {
		// One packet refreshes; the others use the list they have.
		if f.refreshing.CompareAndSwap(false, true) {
			f.RefreshHostAddrs()
			f.refreshing.Store(false)
			h = f.hosts.Load()
		}
		if h == nil {
			return false
		}
	}
	_, ok := h.addrs[a.WithZone("")]
	return ok
}
