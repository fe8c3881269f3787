package engine

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/dnsfwd"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// dnsForwarderLegacyPort is where NetBird's clients older than 0.59 ask
// routing peers, and what management sends (in DNSConfig.ForwarderPort)
// while an account has such peers; otherwise it sends 22054.
const dnsForwarderLegacyPort uint16 = 5353

// dnsRetryEvery is how often a DNS forwarder that could not listen tries
// again (the port held by another process, the address not up yet).
const dnsRetryEvery = 10 * time.Second

// dnsBindFunc opens the DNS forwarder's sockets (dnsfwd.Bind; tests bind
// elsewhere).
type dnsBindFunc func(ap netip.AddrPort) (net.PacketConn, net.Listener, error)

func bindDNS(ap netip.AddrPort) (net.PacketConn, net.Listener, error) {
	pc, ln, err := dnsfwd.Bind(ap)
	if err != nil {
		return nil, nil, err
	}
	return pc, ln, nil
}

// domainDNS is the DNS forwarder of the domain routes this peer serves.
// It exists while this peer serves domain routes with routing-peer DNS
// on (and its learned addresses alone are then routed, even while it
// cannot listen: fail closed); at is where it listens, invalid while it
// does not.
type domainDNS struct {
	fwd *dnsfwd.Forwarder
	// want is where it should listen (the overlay address at the map's
	// forwarder port); at is want once it listens there, port the port
	// it got (want's, unless a test binds elsewhere).
	want, at netip.AddrPort
	port     uint16
	// sources may ask it anything (the union of its routes' sources), for
	// the peer firewall.
	sources []netip.Prefix
}

// routingPeerDNS reports whether the map asks routing peers to resolve
// their domain routes (the account's routing_peer_dns_resolution_enabled).
func routingPeerDNS(nm *mgmtpb.NetworkMap) bool {
	return nm.GetPeerConfig().GetRoutingPeerDnsResolutionEnabled()
}

// servedDomainRoutes are the domain routes of the map whose routing peer
// is self, one per distinct domain set, each with the sources its route
// firewall rules accept (within overlay: the forwarder answers peers
// only, not a LAN host that reaches the overlay address).
func servedDomainRoutes(self string, nm *mgmtpb.NetworkMap, overlay netip.Prefix) []dnsfwd.Route {
	var out []dnsfwd.Route
	idx := map[string]int{}
	legacy := len(nm.GetRoutesFirewallRules()) == 0 && !nm.GetRoutesFirewallRulesIsEmpty()
	for _, r := range nm.GetRoutes() {
		if r.GetPeer() != self || !isDomainRoute(r) || len(r.GetDomains()) == 0 {
			continue
		}
		k := dnsfwd.Key(r.GetDomains())
		i, seen := idx[k]
		if !seen {
			i = len(out)
			idx[k] = i
			out = append(out, dnsfwd.Route{Key: k, Domains: slices.Clone(r.GetDomains())})
		}
		if legacy {
			// An old server: the route lets every peer through.
			out[i].Sources = addSource(out[i].Sources, overlay.Masked())
			continue
		}
		for _, fr := range nm.GetRoutesFirewallRules() {
			if fr.GetAction() != mgmtpb.RuleAction_ACCEPT ||
				(fr.GetRouteID() != r.GetID() && (len(fr.GetDomains()) == 0 || dnsfwd.Key(fr.GetDomains()) != k)) {
				continue
			}
			for _, sr := range fr.GetSourceRanges() {
				p, err := netip.ParsePrefix(sr)
				if err != nil {
					continue // routeRule warns about it
				}
				switch p = p.Masked(); {
				case p.Addr().Is4() != overlay.Addr().Is4():
				case p.Bits() <= overlay.Bits() && p.Contains(overlay.Addr()):
					out[i].Sources = addSource(out[i].Sources, overlay.Masked())
				case overlay.Contains(p.Addr()):
					out[i].Sources = addSource(out[i].Sources, p)
				}
			}
		}
	}
	return out
}

func addSource(ps []netip.Prefix, p netip.Prefix) []netip.Prefix {
	if slices.Contains(ps, p) {
		return ps
	}
	return append(ps, p)
}

// updateDNS keeps the DNS forwarder in step with the map: it exists while
// this peer serves domain routes and the account has routing peers
// resolve them, listening on the overlay address at the map's forwarder
// port. s.mu held. (The peer firewall, applied after, opens only the port
// it listens on.)
func (s *serverRoutes) updateDNS(addr netip.Prefix, nm *mgmtpb.NetworkMap) {
	var rs []dnsfwd.Route
	if !s.disabled && s.dnsBind != nil && routingPeerDNS(nm) {
		rs = servedDomainRoutes(s.self.String(), nm, addr)
	}
	if len(rs) == 0 {
		s.stopDNS()
		return
	}
	port := forwarderPortOf(nm)
	if s.dnsPort != 0 {
		port = s.dnsPort
	}
	if s.dns == nil {
		s.dns = &domainDNS{fwd: dnsfwd.New(dnsfwd.Options{Log: s.log, Lookup: s.dnsLookup, OnChange: s.notifyLearned})}
	}
	var sources []netip.Prefix
	for _, r := range rs {
		for _, p := range r.Sources {
			sources = addSource(sources, p)
		}
	}
	s.dns.sources = sources
	s.dns.fwd.SetRoutes(rs)
	want := netip.AddrPortFrom(addr.Addr(), port)
	if s.dns.at.IsValid() && s.dns.at != want {
		s.dns.fwd.Close() // what it learned stays
		s.dns.at = netip.AddrPort{}
	}
	s.dns.want = want
	s.listenDNS()
}

// listenDNS has the forwarder listen where it should, if it does not; it
// reports whether it started. A failure is logged when it starts; the
// route loop retries every dnsRetryEvery (retryDNS). s.mu held.
func (s *serverRoutes) listenDNS() bool {
	d := s.dns
	if d == nil || d.at.IsValid() {
		return false
	}
	pc, ln, err := s.dnsBind(d.want)
	if err == nil {
		err = d.fwd.Serve(pc, ln)
	}
	if err != nil {
		if !s.dnsFailing {
			// Its domain routes meanwhile let nothing through: nothing
			// is learned.
			s.log.Error("the DNS forwarder of the domain routes served cannot listen; their names stay unresolved for the clients, and no traffic is routed to them; retrying",
				"addr", d.want, "every", dnsRetryEvery, "err", err)
			s.dnsFailing = true
		}
		return false
	}
	s.dnsFailing = false
	d.at, d.port = d.want, d.want.Port()
	if ua, ok := pc.LocalAddr().(*net.UDPAddr); ok {
		d.port = uint16(ua.Port)
	}
	s.log.Info("DNS forwarder for the domain routes served", "addr", pc.LocalAddr().String())
	return true
}

// retryDNS tries again to listen, when the forwarder could not; it
// reports whether it now listens (the caller reapplies the peer
// firewall).
func (s *serverRoutes) retryDNS() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listenDNS()
}

// stopDNS stops the DNS forwarder, if one runs, and forgets what it
// learned. s.mu held.
func (s *serverRoutes) stopDNS() {
	if s.dns == nil {
		return
	}
	s.dns.fwd.Close()
	s.dns = nil
	s.dnsFailing = false
}

// dnsForwarderRules are the peer firewall rules that let the sources of
// the domain routes this peer serves ask its DNS forwarder, on the port
// it listens on; none while it does not listen. The clients of a domain
// resource need no policy towards the routing peer itself, as with
// NetBird, but peers without a policy to the resource do not reach the
// forwarder (which also refuses them, per route).
func dnsForwarderRules(s *serverRoutes) []acl.Rule {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dns == nil || !s.dns.at.IsValid() {
		return nil
	}
	var peers []netip.Addr
	anyPeer := false
	for _, p := range s.dns.sources {
		if p.IsSingleIP() {
			peers = append(peers, p.Addr())
		} else {
			anyPeer = true // a range of the overlay: the forwarder checks
		}
	}
	if anyPeer {
		peers = []netip.Addr{{}}
	}
	port := s.dns.port
	var out []acl.Rule
	for _, peer := range peers {
		for _, proto := range []uint8{acl.ProtoUDP, acl.ProtoTCP} {
			out = append(out, acl.Rule{Peer: peer, Inbound: true, Accept: true, Proto: proto, PortLo: port, PortHi: port})
		}
	}
	return out
}

// learnedWait bounds how long a DNS answer waits for the route firewall
// to take the addresses it learned.
const learnedWait = time.Second

// notifyLearned has the engine's route loop apply what the DNS forwarder
// learned, and waits (at most s.learnedWait, or until the forwarder
// closes) until it did: the answer must not reach the client before the
// firewall lets its first packet through. Answers learned while the loop
// applies share its next apply.
func (s *serverRoutes) notifyLearned(ctx context.Context) {
	s.learned.wait(ctx, s.learnedWait)
}
