package engine

import (
	"net/netip"
	"slices"
	"time"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/dnsfwd"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// The ports this peer's DNS forwarder answers on as a routing peer of
// domain routes (NetBird's: 22054, and 5353 for clients of accounts with
// peers older than 0.59.0, which management then tells to use 5353).
const (
	dnsForwarderPort       uint16 = 22054
	dnsForwarderLegacyPort uint16 = 5353
)

// domainDNS is the DNS forwarder of the domain routes this peer serves,
// listening on addr.
type domainDNS struct {
	fwd  *dnsfwd.Forwarder
	addr netip.Addr
}

// routingPeerDNS reports whether the map asks routing peers to resolve
// their domain routes (the account's routing_peer_dns_resolution_enabled).
func routingPeerDNS(nm *mgmtpb.NetworkMap) bool {
	return nm.GetPeerConfig().GetRoutingPeerDnsResolutionEnabled()
}

// servedDomainRoutes are the domain routes of the map whose routing peer
// is self, one per distinct domain set.
func servedDomainRoutes(self string, nm *mgmtpb.NetworkMap) []dnsfwd.Route {
	var out []dnsfwd.Route
	seen := map[string]bool{}
	for _, r := range nm.GetRoutes() {
		if r.GetPeer() != self || !isDomainRoute(r) || len(r.GetDomains()) == 0 {
			continue
		}
		k := dnsfwd.Key(r.GetDomains())
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, dnsfwd.Route{Key: k, Domains: slices.Clone(r.GetDomains())})
	}
	return out
}

// updateDNS runs the DNS forwarder while this peer serves domain routes
// and the account has routing peers resolve them; it stops it otherwise.
// s.mu held.
func (s *serverRoutes) updateDNS(addr netip.Prefix, nm *mgmtpb.NetworkMap) {
	var rs []dnsfwd.Route
	if !s.disabled && len(s.dnsPorts) > 0 && s.learned != nil && routingPeerDNS(nm) {
		rs = servedDomainRoutes(s.self.String(), nm)
	}
	if len(rs) == 0 || (s.dns != nil && s.dns.addr != addr.Addr()) {
		s.stopDNS()
	}
	if len(rs) == 0 {
		return
	}
	if s.dns == nil {
		fwd := dnsfwd.New(dnsfwd.Options{Log: s.log, Lookup: s.dnsLookup, OnChange: s.notifyLearned})
		var aps []netip.AddrPort
		for _, p := range s.dnsPorts {
			aps = append(aps, netip.AddrPortFrom(addr.Addr(), p))
		}
		if err := fwd.Listen(aps...); err != nil {
			// Its domain routes then let nothing through: no address is
			// learned. The next map tries again.
			s.log.Error("the DNS forwarder of the domain routes served cannot listen; their names stay unresolved for the clients", "err", err)
			return
		}
		s.log.Info("DNS forwarder for the domain routes served", "addrs", aps)
		s.dns = &domainDNS{fwd: fwd, addr: addr.Addr()}
	}
	s.dns.fwd.SetRoutes(rs)
}

// stopDNS stops the DNS forwarder, if one runs. s.mu held.
func (s *serverRoutes) stopDNS() {
	if s.dns == nil {
		return
	}
	s.dns.fwd.Close()
	s.dns = nil
}

// dnsForwarderRules are the peer firewall rules that let every peer ask
// the DNS forwarder the map makes this peer (self) run, none when it runs
// none: the clients of a domain resource need no policy towards the
// routing peer itself, as with NetBird.
func dnsForwarderRules(self string, nm *mgmtpb.NetworkMap, s *serverRoutes) []acl.Rule {
	if s == nil || s.disabled || len(s.dnsPorts) == 0 || !routingPeerDNS(nm) || len(servedDomainRoutes(self, nm)) == 0 {
		return nil
	}
	var out []acl.Rule
	for _, p := range s.dnsPorts {
		for _, proto := range []uint8{acl.ProtoUDP, acl.ProtoTCP} {
			out = append(out, acl.Rule{Inbound: true, Accept: true, Proto: proto, PortLo: p, PortHi: p})
		}
	}
	return out
}

// learnedWait bounds how long a DNS answer waits for the route firewall
// to take the addresses it learned.
const learnedWait = time.Second

// notifyLearned has the engine's route loop apply what the DNS forwarder
// learned, and waits (at most learnedWait) until it did: the answer must
// not reach the client before the firewall lets its first packet through.
func (s *serverRoutes) notifyLearned() {
	t := time.NewTimer(learnedWait)
	defer t.Stop()
	done := make(chan struct{})
	select {
	case s.learned <- done:
	case <-t.C:
		return
	}
	select {
	case <-done:
	case <-t.C:
	}
}
