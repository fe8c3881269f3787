package grpcapi

import (
	"net/netip"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Route.NetworkType values, as NetBird numbers them.
const (
	netTypeIPv4   = 1
	netTypeIPv6   = 2
	netTypeDomain = 3
)

// domainPlaceholder is the Network a domain route carries: clients ignore
// it once Domains are set, and the reference sends this one (TEST-NET-1).
var domainPlaceholder = netip.PrefixFrom(netip.AddrFrom4([4]byte{192, 0, 2, 0}), 32)

// routes encodes a map's routes as NetBird's Route messages.
func routes(rs []networkmap.Route) []*mgmtpb.Route {
	if len(rs) == 0 {
		return nil
	}
	out := make([]*mgmtpb.Route, 0, len(rs))
	for _, r := range rs {
		pr := &mgmtpb.Route{ID: r.ID, NetID: r.NetID, Peer: r.Peer.String(), Metric: int64(r.Metric), Masquerade: r.Masquerade,
			KeepRoute: r.KeepRoute, SkipAutoApply: r.SkipAutoApply}
		switch {
		case r.Dynamic():
			pr.Network, pr.NetworkType, pr.Domains = domainPlaceholder.String(), netTypeDomain, r.Domains
		case r.Network.Addr().Is6():
			pr.Network, pr.NetworkType = r.Network.String(), netTypeIPv6
		default:
			pr.Network, pr.NetworkType = r.Network.String(), netTypeIPv4
		}
		out = append(out, pr)
	}
	return out
}

// routeRules encodes route firewall rules as NetBird's RouteFirewallRule
// messages: one per port or port range (none: all ports). PortInfo is
// always present, empty for all ports, as the reference sends it.
func routeRules(rs []networkmap.RouteRule) []*mgmtpb.RouteFirewallRule {
	if len(rs) == 0 {
		return nil
	}
	var out []*mgmtpb.RouteFirewallRule
	for _, r := range rs {
		base := func() *mgmtpb.RouteFirewallRule {
			fr := &mgmtpb.RouteFirewallRule{Action: mgmtpb.RuleAction_ACCEPT, Protocol: protocols[r.Protocol], PortInfo: &mgmtpb.PortInfo{},
				IsDynamic: len(r.Domains) > 0, Domains: r.Domains, PolicyID: []byte(r.PolicyID), RouteID: r.RouteID}
			if r.Action == account.ActionDrop {
				fr.Action = mgmtpb.RuleAction_DROP
			}
			if fr.IsDynamic {
				fr.Destination = domainPlaceholder.String()
			} else {
				fr.Destination = r.Destination.String()
			}
			for _, s := range r.Sources {
				fr.SourceRanges = append(fr.SourceRanges, s.String())
			}
			return fr
		}
		if len(r.Ports) == 0 && len(r.Ranges) == 0 {
			out = append(out, base())
			continue
		}
		for _, p := range r.Ports {
			fr := base()
			fr.PortInfo.PortSelection = &mgmtpb.PortInfo_Port{Port: uint32(p)}
			out = append(out, fr)
		}
		for _, pr := range r.Ranges {
			fr := base()
			fr.PortInfo.PortSelection = &mgmtpb.PortInfo_Range_{Range: &mgmtpb.PortInfo_Range{Start: uint32(pr.Start), End: uint32(pr.End)}}
			out = append(out, fr)
		}
	}
	return out
}
