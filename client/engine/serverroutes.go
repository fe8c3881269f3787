package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/dnsfwd"
	"github.com/wiremesh/wiremesh/client/forward"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// NetworkType values of mgmtpb.Route.
const (
	netTypeIPv4   = 1
	netTypeIPv6   = 2
	netTypeDomain = 3
)

// serving is what this peer does as a routing peer: the networks it
// forwards to (with masquerade per route) and the route firewall.
type serving struct {
	Routes  []forward.Route
	Routing acl.Routing
}

// servingFromMap picks the map's server routes (those whose routing peer
// is self) and converts them and the route firewall rules to typed
// values. A domain route is forwarded (and masqueraded) to the whole
// address families of the overlay (overlay6: this peer has an IPv6
// overlay address, so peers can send IPv6 through it). Which
// destinations the filter lets through depends on learned:
// nil (the clients resolve the names, as NetBird's routing peers do
// without their DNS forwarder) lets through anything, the rules still
// limiting sources, protocols and ports; otherwise (this peer's DNS
// forwarder resolves them) only the addresses learned(dnsfwd.Key(domains))
// returns for the route. IPv6 routes (management mirrors an exit node's
// 0.0.0.0/0 as ::/0 for peers on the IPv6 overlay) are served only with an
// IPv6 overlay address: without one no peer can send IPv6 through this
// peer, and IPv6 forwarding would be on for nothing. Problems come back as
// warnings, one per item.
func servingFromMap(self key.Public, routes []*mgmtpb.Route, rules []*mgmtpb.RouteFirewallRule, rulesEmpty, overlay6 bool,
	learned func(key string) []netip.Prefix) (serving, []string) {
	var s serving
	var warn []string
	masq := map[netip.Prefix]bool{}
	var domainRoutes []string
	var filterNets []netip.Prefix // what the filter routes, when it differs (learned)
	seenNet := map[netip.Prefix]bool{}
	for _, r := range routes {
		if r.GetPeer() != self.String() {
			continue
		}
		nets, err := routeNetworks(r, overlay6)
		if err != nil {
			warn = append(warn, fmt.Sprintf("route %s (%s): %v", r.GetID(), r.GetNetID(), err))
			continue
		}
		if isDomainRoute(r) {
			domainRoutes = append(domainRoutes, fmt.Sprintf("%s (%s)", r.GetID(), r.GetNetID()))
		}
		if learned != nil {
			fn := nets
			if isDomainRoute(r) {
				fn = learned(dnsfwd.Key(r.GetDomains()))
			}
			for _, n := range fn {
				if !seenNet[n] {
					seenNet[n] = true
					filterNets = append(filterNets, n)
				}
			}
		}
		for _, n := range nets {
			// Routes of one network (HA, several IDs) merge: masquerade
			// when any of them asks for it.
			if _, seen := masq[n]; !seen {
				s.Routing.Networks = append(s.Routing.Networks, n)
			}
			masq[n] = masq[n] || r.GetMasquerade()
		}
	}
	sort.Slice(s.Routing.Networks, func(i, j int) bool { return s.Routing.Networks[i].String() < s.Routing.Networks[j].String() })
	for _, n := range s.Routing.Networks {
		s.Routes = append(s.Routes, forward.Route{Network: n, Masquerade: masq[n]})
	}
	if learned != nil {
		sort.Slice(filterNets, func(i, j int) bool { return filterNets[i].String() < filterNets[j].String() })
		s.Routing.Networks = filterNets
	}
	if len(s.Routes) == 0 {
		return s, warn
	}
	// The spec's legacy rule: no rules and not marked empty is an old
	// server, which meant "allow all".
	if len(rules) == 0 && !rulesEmpty {
		s.Routing.AllowAll = true
		for _, d := range domainRoutes {
			warn = append(warn, fmt.Sprintf("domain route %s came without route firewall rules (an old management server): "+
				"this peer forwards whatever any peer sends anywhere, an open exit for every peer", d))
		}
		return s, warn
	}
	for _, fr := range rules {
		r, err := routeRule(fr, overlay6)
		if err == nil && learned != nil && len(fr.GetDomains()) > 0 {
			r.Dests = learned(dnsfwd.Key(fr.GetDomains())) // nothing learned: matches nothing
		}
		if err != nil {
			warn = append(warn, fmt.Sprintf("route firewall rule for %s: %v", fr.GetRouteID(), err))
			continue
		}
		s.Routing.Rules = append(s.Routing.Rules, r)
	}
	return s, warn
}

func isDomainRoute(r *mgmtpb.Route) bool {
	return r.GetNetworkType() == netTypeDomain || len(r.GetDomains()) > 0
}

// anyDest is every destination the overlay can carry: what a domain
// route or a dynamic rule covers, the clients resolving the names.
func anyDest(overlay6 bool) []netip.Prefix {
	if overlay6 {
		return []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	}
	return []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}
}

// errIPv6NotCarried: an IPv6 route on a peer without an IPv6 overlay
// address.
var errIPv6NotCarried = errors.New("IPv6 route not served: this peer has no IPv6 overlay address (not in the account's IPv6 groups, or --disable-ipv6)")

// routeNetworks is what a route forwards to.
func routeNetworks(r *mgmtpb.Route, overlay6 bool) ([]netip.Prefix, error) {
	if isDomainRoute(r) {
		return anyDest(overlay6), nil
	}
	p, err := netip.ParsePrefix(r.GetNetwork())
	if err != nil {
		return nil, fmt.Errorf("bad network %q: %w", r.GetNetwork(), err)
	}
	if p.Addr().Is6() && !p.Addr().Is4In6() && !overlay6 {
		return nil, errIPv6NotCarried
	}
	return []netip.Prefix{p.Masked()}, nil
}

func routeRule(fr *mgmtpb.RouteFirewallRule, overlay6 bool) (acl.RouteRule, error) {
	r := acl.RouteRule{Accept: fr.GetAction() == mgmtpb.RuleAction_ACCEPT}
	for _, s := range fr.GetSourceRanges() {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return r, fmt.Errorf("bad source range %q: %w", s, err)
		}
		if p.Bits() == 0 {
			r.Sources = nil // any source of the family: no narrowing
			break
		}
		r.Sources = append(r.Sources, p.Masked())
	}
	if fr.GetIsDynamic() || len(fr.GetDomains()) > 0 {
		r.Dests = anyDest(overlay6)
	} else {
		p, err := netip.ParsePrefix(fr.GetDestination())
		if err != nil {
			return r, fmt.Errorf("bad destination %q: %w", fr.GetDestination(), err)
		}
		r.Dests = []netip.Prefix{p.Masked()}
	}
	switch fr.GetProtocol() {
	case mgmtpb.RuleProtocol_ALL:
		r.Proto = acl.ProtoAny
	case mgmtpb.RuleProtocol_TCP:
		r.Proto = acl.ProtoTCP
	case mgmtpb.RuleProtocol_UDP:
		r.Proto = acl.ProtoUDP
	case mgmtpb.RuleProtocol_ICMP:
		r.Proto = acl.ProtoICMP
	case mgmtpb.RuleProtocol_CUSTOM:
		if fr.GetCustomProtocol() == 0 || fr.GetCustomProtocol() > 255 {
			return r, fmt.Errorf("bad custom protocol %d", fr.GetCustomProtocol())
		}
		r.Proto = uint8(fr.GetCustomProtocol())
	default:
		return r, fmt.Errorf("protocol %s not understood", fr.GetProtocol())
	}
	switch pi := fr.GetPortInfo().GetPortSelection().(type) {
	case *mgmtpb.PortInfo_Port:
		if pi.Port == 0 || pi.Port > 65535 {
			return r, fmt.Errorf("bad port %d", pi.Port)
		}
		r.PortLo, r.PortHi = uint16(pi.Port), uint16(pi.Port)
	case *mgmtpb.PortInfo_Range_:
		lo, hi := pi.Range.GetStart(), pi.Range.GetEnd()
		if lo == 0 || hi > 65535 || lo > hi {
			return r, fmt.Errorf("bad port range %d-%d", lo, hi)
		}
		r.PortLo, r.PortHi = uint16(lo), uint16(hi)
	}
	return r, nil
}

// serverRoutes applies servingFromMap's result to the filter and the
// host's forwarding; it reapplies only what changed.
type serverRoutes struct {
	log *slog.Logger
	fw  ruleSetter
	fwd *forward.Forwarder // nil: this host cannot route (logged once)
	// disabled serves nothing whatever the map says
	// (--disable-server-routes); blockLAN keeps routed traffic from the
	// host's own networks, which lan lists (--block-lan-access).
	disabled, blockLAN bool
	lan                func() ([]netip.Prefix, error)
	// dnsBind opens the DNS forwarder's sockets (nil: it never runs);
	// dnsPort, when set, is the port it listens on whatever the map says
	// (tests).
	dnsBind dnsBindFunc
	dnsPort uint16
	// learned carries the DNS forwarder's changes to the engine's route
	// loop, which applies them (relearn); an answer waits for that at most
	// learnedWait.
	learned     *coalescer
	learnedWait time.Duration
	// dnsLookup resolves for the DNS forwarder (nil: the host's resolver).
	dnsLookup dnsfwd.LookupFunc

	// mu guards the rest: apply runs inside onSync (under the engine's
	// mu), relearn on a DNS forwarder's goroutine.
	mu      sync.Mutex
	overlay netip.Prefix
	// overlay6 is this peer's IPv6 overlay address (zero: none), see
	// setOverlay6.
	overlay6 netip.Prefix
	cur      serving
	// curOverlays: the overlays the forwarder's masquerade was last
	// given with cur; a moved overlay applies again though cur is equal.
	curOverlays []netip.Prefix
	warned      bool
	// warnings logged for the last map: a problem is logged when it
	// appears, not on every map that still carries it.
	problems map[string]bool
	// The last map's inputs, for relearn; dns is the running forwarder.
	self key.Public
	nm   *mgmtpb.NetworkMap
	dns  *domainDNS
	// dnsFailing: the forwarder could not listen (logged once).
	dnsFailing bool
}

// newServerRoutes restores what a crashed run left (forwarding sysctls,
// its NAT table) before anything else.
func newServerRoutes(o Options, iface string, fw ruleSetter) *serverRoutes {
	s := &serverRoutes{log: o.Log, fw: fw, disabled: o.DisableServerRoutes, blockLAN: o.BlockLANAccess, lan: hostNetworks,
		dnsBind: bindDNS, learned: newCoalescer(), learnedWait: learnedWait}
	if s.disabled {
		// Nothing of the host's forwarding is touched at all.
		o.Log.Info("server routes disabled (--disable-server-routes): this peer routes for no one")
		return s
	}
	fwd, err := forward.New(forward.Options{StateDir: o.StateDir, Interface: iface, Log: o.Log})
	if err != nil {
		o.Log.Warn("this peer cannot act as a routing peer", "err", err)
		return s
	}
	s.fwd = fwd
	return s
}

// apply makes this peer serve the map's server routes, from the
// interface address addr.
func (s *serverRoutes) apply(self key.Public, addr netip.Prefix, nm *mgmtpb.NetworkMap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if addr != s.overlay {
		s.fw.SetOverlay(addr.Addr(), addr.Masked())
		s.overlay = addr
	}
	s.self, s.nm = self, nm
	s.updateDNS(addr, nm)
	s.applyLocked(false)
}

// setOverlay6 sets this peer's IPv6 overlay address (the zero Prefix:
// none), which IPv6 routes and their masquerade need; the next apply uses
// it.
func (s *serverRoutes) setOverlay6(addr netip.Prefix) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overlay6 = addr
}

// overlays is the overlay networks, one per family this peer has. s.mu
// held.
func (s *serverRoutes) overlays() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range []netip.Prefix{s.overlay, s.overlay6} {
		if p.IsValid() {
			out = append(out, p.Masked())
		}
	}
	return out
}

// relearn applies the addresses the DNS forwarder learned or forgot.
func (s *serverRoutes) relearn() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.nm != nil {
		s.applyLocked(true)
	}
}

// applyLocked applies the last map; relearn: only the DNS forwarder's
// addresses changed, which never touches forwarding. s.mu held.
func (s *serverRoutes) applyLocked(relearn bool) {
	self, addr, nm := s.self, s.overlay, s.nm
	var learned func(string) []netip.Prefix
	if s.dns != nil {
		// Also while the forwarder cannot listen: its domain routes then
		// let nothing through rather than anything (fail closed).
		l := s.dns.fwd.Learned()
		learned = func(k string) []netip.Prefix { return l[k] }
	}
	want, warns := servingFromMap(self, nm.GetRoutes(), nm.GetRoutesFirewallRules(), nm.GetRoutesFirewallRulesIsEmpty(), addr.Addr().Is6() || s.overlay6.IsValid(), learned)
	problems := make(map[string]bool, len(warns))
	for _, w := range warns {
		if !s.problems[w] {
			s.log.Warn("server route", "problem", w)
		}
		problems[w] = true
	}
	s.problems = problems
	if s.disabled && len(want.Routes) > 0 {
		if !s.warned {
			s.log.Warn("management made this peer a routing peer, but server routes are disabled here (--disable-server-routes); its routes stay unserved")
			s.warned = true
		}
		want = serving{}
	}
	if s.blockLAN && len(want.Routes) > 0 {
		lan, err := s.lan()
		if err != nil {
			// Better refuse routed traffic than open the LAN.
			s.log.Error("block LAN access: the host's networks are unknown; routed traffic is refused", "err", err)
			want = serving{}
		} else {
			want.Routing = withLANBlocked(want.Routing, lan, s.overlays()...)
		}
	}
	// The masquerade matches the overlays: when one moved (the account's
	// range changed) the forwarder applies again, though the routes did
	// not change. Without routes nothing of it is installed.
	overlays := s.overlays()
	moved := len(want.Routes) > 0 && !slices.Equal(overlays, s.curOverlays)
	if reflect.DeepEqual(want, s.cur) && !moved {
		return
	}
	if len(want.Routes) > 0 && s.fwd == nil {
		if !s.warned {
			s.log.Error("management made this peer a routing peer, but it cannot forward here; its routes stay unserved")
			s.warned = true
		}
		want = serving{}
	}
	if s.fwd != nil && !(relearn && reflect.DeepEqual(want.Routes, s.cur.Routes) && !moved) {
		if err := s.fwd.Apply(overlays, want.Routes); err != nil {
			// The filter stays closed to routed traffic rather than
			// forward without the masquerade asked for; the next map
			// tries again.
			s.log.Error("forwarding for the server routes not applied; routed traffic is refused", "err", err)
			s.fw.SetRouting(acl.Routing{})
			s.cur, s.curOverlays = serving{}, nil
			return
		}
	}
	s.curOverlays = overlays
	if !relearn || !reflect.DeepEqual(want.Routing, s.cur.Routing) {
		s.fw.SetRouting(want.Routing)
	}
	s.cur = want
	switch {
	case relearn:
		// Every new name a client asks about: not worth an info line.
		s.log.Debug("domain route addresses", "routed", len(want.Routing.Networks))
	case len(want.Routes) > 0:
		s.log.Info("serving routes", "routes", fmt.Sprint(want.Routes), "rules", len(want.Routing.Rules), "legacy_allow_all", want.Routing.AllowAll)
	default:
		s.log.Info("no server routes")
	}
}

// close stops forwarding and restores what the host had.
func (s *serverRoutes) close() {
	s.mu.Lock()
	s.stopDNS()
	s.mu.Unlock()
	if s.fwd == nil {
		return
	}
	if err := s.fwd.Close(); err != nil {
		s.log.Warn("restore the host's forwarding settings", "err", err)
	}
}

// lastMap is the map last applied (nil before the first).
func (s *serverRoutes) lastMap() *mgmtpb.NetworkMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.nm
}

// served is the networks the filter routes now (for status).
func (s *serverRoutes) served() []netip.Prefix {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]netip.Prefix(nil), s.cur.Routing.Networks...)
}
