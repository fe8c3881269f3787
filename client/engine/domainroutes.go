package engine

import (
	"context"
	"net/netip"
	"time"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/client/resolver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// forwarderPortOf is the port routing peers' DNS forwarders answer on, as
// the map says (0: an old server; NetBird's clients then use 5353).
func forwarderPortOf(nm *mgmtpb.NetworkMap) uint16 {
	p := nm.GetDNSConfig().GetForwarderPort()
	if p <= 0 || p > 65535 {
		return dnsForwarderLegacyPort
	}
	return uint16(p)
}

// domainPeers is the overlay address of every peer, and the routing
// peers' DNS forwarder port, as of the last map.
type domainPeers struct {
	port uint16
	ips  map[key.Public]netip.Addr
}

// domainRouter is the engine as the resolver's resolver.DomainRoutes: the
// names of domain routes go to the DNS forwarder of the routing peer in
// use, and their answers become routes (through that routing peer, and
// through whichever takes over from it). Its methods run on resolver
// handler goroutines, which a resolver closing under the engine's lock
// waits for: they never take e.mu.
type domainRouter struct{ e *Engine }

var _ resolver.DomainRoutes = domainRouter{}

// Upstream is the chosen routing peer's overlay address at the forwarder
// port.
func (d domainRouter) Upstream(name string) (netip.AddrPort, bool) {
	k, chosen, ok := d.e.routes.DomainPeer(name)
	if !ok {
		return netip.AddrPort{}, false
	}
	dp := d.e.domainPeers.Load()
	if !chosen || dp == nil {
		return netip.AddrPort{}, true
	}
	ip, known := dp.ips[k]
	if !known {
		return netip.AddrPort{}, true
	}
	return netip.AddrPortFrom(ip, dp.port), true
}

// Learned installs the answer's addresses before the answer goes out, so
// that the client's first packet takes the route: the route loop applies
// them, and the wait ends with ctx (the resolver cancels it when closing)
// or after learnedWait.
func (d domainRouter) Learned(ctx context.Context, name string, addrs []netip.Addr) {
	if !d.e.routes.Learn(name, addrs) {
		return
	}
	d.e.evalReq.wait(ctx, learnedWait)
}

// applyDomainRouting follows the account's routing-peer DNS resolution:
// on, the resolver sends the names of the domain routes to their routing
// peers and the route client stops resolving them itself. e.mu held,
// after the map's peers are in e.peers.
func (e *Engine) applyDomainRouting(nm *mgmtpb.NetworkMap) {
	on := routingPeerDNS(nm)
	dp := &domainPeers{port: forwarderPortOf(nm), ips: make(map[key.Public]netip.Addr, len(e.peers))}
	for k, r := range e.peers {
		if len(r.ips) > 0 {
			dp.ips[k] = r.ips[0].Addr()
		}
	}
	e.domainPeers.Store(dp)
	e.routes.SetPeerResolved(on)
	if e.dns == nil || e.dns.res == nil {
		return
	}
	if on && !e.o.DisableClientRoutes {
		e.dns.setDomainRoutes(domainRouter{e}, e.routes.Domains())
	} else {
		e.dns.setDomainRoutes(nil, nil)
	}
}

// setDomainRoutes passes the domain routes to the resolver and, when
// that changes what the host must send it, tells the host again.
func (d *dnsService) setDomainRoutes(dr resolver.DomainRoutes, domains []string) {
	before := d.res.Config()
	d.res.SetDomainRoutes(dr, domains)
	if d.host && !d.res.Config().Equal(before) && d.last != nil {
		rc, _ := resolver.Local{Self: d.ip, Overlay: d.overlay}.FromProto(d.last)
		d.pointHost(rc)
	}
}

// reaskTimeout bounds asking the new routing peer about one name.
const reaskTimeout = 3 * time.Second

// runReask asks a domain route's new routing peer about the names its
// former one answered, until ctx ends: the new one lets through only the
// addresses its own DNS forwarder answered, so the client's next
// connections (from addresses its host still caches) would otherwise be
// dropped there until the host asks again.
func (e *Engine) runReask(ctx context.Context) {
	tick := time.NewTicker(routeInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		names := e.routes.Reask()
		if len(names) == 0 {
			continue
		}
		e.mu.Lock()
		var res *resolver.Resolver
		if e.dns != nil {
			res = e.dns.res
		}
		e.mu.Unlock()
		if res == nil {
			continue
		}
		for _, name := range names {
			for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
				q := new(dns.Msg)
				q.SetQuestion(dns.Fqdn(name), qt)
				qctx, cancel := context.WithTimeout(ctx, reaskTimeout)
				m := res.Answer(qctx, q, false) // learns through domainRouter
				cancel()
				if qt == dns.TypeA && m.Rcode != dns.RcodeSuccess {
					e.log.Debug("ask the new routing peer about a name", "name", name, "rcode", dns.RcodeToString[m.Rcode])
				}
			}
		}
	}
}
