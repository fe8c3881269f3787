package acl

import (
	"net/netip"
)

// RouteRule is one rule for traffic this peer forwards from the tunnel to
// a network it routes (NetBird's route firewall rules, from policies whose
// destination is a route or a network resource).
type RouteRule struct {
	// Sources are the allowed senders (overlay addresses or prefixes);
	// empty matches any source.
	Sources []netip.Prefix
	// Dests is the routed destination: a prefix, or what a domain
	// resource resolved to. Empty matches nothing (a domain rule before
	// its names resolve).
	Dests  []netip.Prefix
	Accept bool
	Proto  uint8 // ProtoAny, ProtoICMP, ProtoTCP or ProtoUDP
	// PortLo..PortHi is the destination port range (0, 0: any port).
	PortLo, PortHi uint16
}

func (r RouteRule) matches(p packet) bool {
	if len(r.Sources) > 0 && !containsAddr(r.Sources, p.src) {
		return false
	}
	if !containsAddr(r.Dests, p.dst) {
		return false
	}
	return Rule{Proto: r.Proto, PortLo: r.PortLo, PortHi: r.PortHi}.matches(netip.Addr{}, p.proto, p.dport, p.hasPorts)
}

func containsAddr(ps []netip.Prefix, a netip.Addr) bool {
	for _, p := range ps {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Routing is what the filter applies to packets from the tunnel that are
// not for this host: with no routed networks (Networks empty) they are
// dropped; else a packet must be for one of Networks and pass the rules.
type Routing struct {
	// Networks are the networks this peer routes (its server routes, and
	// the addresses its domain routes resolved to).
	Networks []netip.Prefix
	// AllowAll admits every flow to Networks: an old management server
	// that sends no route rules (the spec's legacy rule).
	AllowAll bool
	Rules    []RouteRule
}

// SetOverlay tells the filter the overlay network. Packets for this host
// (Local) pass the peer rules; those from outside the overlay pass only
// as replies to flows this host opened (a routing peer's LAN answering),
// whatever the allow-all or any-peer rules say.
func (f *Filter) SetOverlay(local netip.Addr, overlay netip.Prefix) {
	// Before local is set no packet asks whether it is the host's: read
	// the addresses first, so the first routed packet has them.
	f.RefreshHostAddrs()
	f.mu.Lock()
	f.local, f.overlay = local, overlay.Masked()
	f.mu.Unlock()
}

// SetOverlay6 tells the filter this host's IPv6 overlay address and the
// IPv6 overlay network, as SetOverlay does for IPv4; zero values (no IPv6
// address) make every IPv6 source a non-peer, admitted only as a reply.
func (f *Filter) SetOverlay6(local netip.Addr, overlay netip.Prefix) {
	f.RefreshHostAddrs()
	f.mu.Lock()
	f.local6, f.overlay6 = local, overlay.Masked()
	f.mu.Unlock()
}

// SetRouting replaces what the filter forwards. Flows already accepted
// stay tracked, so their replies keep passing.
func (f *Filter) SetRouting(r Routing) {
	var drop, accept []RouteRule
	for _, rr := range r.Rules {
		if rr.Accept {
			accept = append(accept, rr)
		} else {
			drop = append(drop, rr)
		}
	}
	f.RefreshHostAddrs() // a map apply is a cheap moment to catch up
	f.mu.Lock()
	f.routed, f.routeAll, f.routeDrop, f.routeAccept = append([]netip.Prefix(nil), r.Networks...), r.AllowAll, drop, accept
	f.mu.Unlock()
}

// forward decides on a packet from the tunnel for another host: one this
// peer routes to, when the route rules let it.
func (f *Filter) forward(p packet) bool {
	f.mu.RLock()
	routed, all, drop, accept := f.routed, f.routeAll, f.routeDrop, f.routeAccept
	ov4, ov6 := f.overlay, f.overlay6
	f.mu.RUnlock()
	if (ov4.IsValid() && ov4.Contains(p.dst)) || (ov6.IsValid() && ov6.Contains(p.dst)) {
		// Another peer's overlay address: a routed ::/0 or 0.0.0.0/0
		// contains it, but relaying it would let a peer that
		// management left out of the other's map reach it through this
		// one, with its own source address.
		return false
	}
	if !containsAddr(routed, p.dst) {
		return false // not a network of ours: never a transit hop
	}
	// A reply from a peer to a flow the LAN opened towards it (or the
	// next packets of a forwarded flow already accepted).
	if (p.hasPorts || p.icmpEcho) && f.known(flow{proto: p.proto, local: p.dst, remote: p.src, lport: p.dport, rport: p.sport}) {
		return true
	}
	for _, r := range drop {
		if r.matches(p) {
			return false
		}
	}
	ok := all
	for _, r := range accept {
		if ok {
			break
		}
		ok = r.matches(p)
	}
	if ok && (p.hasPorts || p.icmpEcho) {
		// Track what the LAN side answers, so the reply path (Outbound)
		// stays open and the peer's next packets skip the rules.
		f.track(flow{proto: p.proto, local: p.dst, remote: p.src, lport: p.dport, rport: p.sport}, true)
	}
	return ok
}
