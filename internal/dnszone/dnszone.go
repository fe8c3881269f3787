// Package dnszone builds the DNS zone of the peers a network map shows, in
// the spec's CustomZone form. Management sends it in every full map; the
// agent rebuilds it after a map delta, so both ends derive it the same way.
package dnszone

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/internal/compactip"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TTL of peer records, in seconds (as the reference server).
const TTL = 300

// Host is one peer's name and overlay addresses. IPv6 is set only when
// the map shows the peer's IPv6 overlay address (both the peer and the
// receiver are v6-active; the zero Addr otherwise).
type Host struct {
	FQDN string
	IP   netip.Addr
	IPv6 netip.Addr
}

// Zone returns an empty zone for domain, in the spec's trailing-dot form.
func Zone(domain string) *mgmtpb.CustomZone {
	return &mgmtpb.CustomZone{Domain: dns.Fqdn(strings.ToLower(domain))}
}

// Record is h's A record in domain, or nil when h's name lies outside it
// or h has no IPv4 address. Names are lower-cased, without the final dot.
func Record(domain string, h Host) *mgmtpb.SimpleRecord {
	name, ok := inZone(domain, h.FQDN)
	if !ok || !h.IP.Is4() {
		return nil
	}
	return &mgmtpb.SimpleRecord{Name: name, Type: int64(dns.TypeA), Class: "IN", TTL: TTL, RData: h.IP.String()}
}

// RecordAAAA is h's AAAA record in domain, or nil when h's name lies
// outside it or h has no IPv6 address (IPv4-mapped ones do not count).
func RecordAAAA(domain string, h Host) *mgmtpb.SimpleRecord {
	name, ok := inZone(domain, h.FQDN)
	if !ok || !h.IPv6.Is6() || h.IPv6.Is4In6() {
		return nil
	}
	return &mgmtpb.SimpleRecord{Name: name, Type: int64(dns.TypeAAAA), Class: "IN", TTL: TTL, RData: h.IPv6.String()}
}

// inZone is fqdn as a record name of domain's zone, when it lies inside.
func inZone(domain, fqdn string) (string, bool) {
	zone := dns.Fqdn(strings.ToLower(domain))
	name := strings.ToLower(strings.TrimSuffix(fqdn, "."))
	if name == "" || dns.Fqdn(name) == zone || !dns.IsSubDomain(zone, dns.Fqdn(name)) {
		return "", false
	}
	return name, true
}

// Peers returns the zone of domain with the records of hosts: in their
// order (management lists the peer itself, then the others by address),
// each host's A record then its AAAA record.
func Peers(domain string, hosts []Host) *mgmtpb.CustomZone {
	z := Zone(domain)
	z.Records = make([]*mgmtpb.SimpleRecord, 0, len(hosts))
	for _, h := range hosts {
		if r := Record(domain, h); r != nil {
			z.Records = append(z.Records, r)
		}
		if r := RecordAAAA(domain, h); r != nil {
			z.Records = append(z.Records, r)
		}
	}
	return z
}

// Domain is the peer domain of a map: what follows the first label of the
// peer's own FQDN ("" when it has none).
func Domain(selfFQDN string) string {
	_, d, ok := strings.Cut(strings.TrimSuffix(selfFQDN, "."), ".")
	if !ok {
		return ""
	}
	return d
}

// Fill builds the records of a zone the server left for the client to
// build (CustomZone.wiremeshDerivedRecords), as Refresh does.
func Fill(nm *mgmtpb.NetworkMap) {
	for _, z := range nm.GetDNSConfig().GetCustomZones() {
		if z.GetWiremeshDerivedRecords() {
			Refresh(nm)
			return
		}
	}
}

// Refresh rebuilds, in nm, the peer zone of the domain of nm's own FQDN
// from nm's peers (itself first, then the remote peers by address, the
// order management uses): an A record from peerConfig.address and each
// remote peer's first allowed IP, and an AAAA record from
// peerConfig.address_v6 and each remote peer's first allowed /128, which
// management lists only when the receiver and that peer are both on the
// IPv6 overlay. It changes nothing when the map carries no such zone (DNS
// off, or a server that sends none).
func Refresh(nm *mgmtpb.NetworkMap) {
	pc := nm.GetPeerConfig()
	domain := Domain(pc.GetFqdn())
	if domain == "" || !nm.GetDNSConfig().GetServiceEnable() {
		return
	}
	zone := dns.Fqdn(strings.ToLower(domain))
	i := slices.IndexFunc(nm.DNSConfig.CustomZones, func(z *mgmtpb.CustomZone) bool { return strings.EqualFold(z.GetDomain(), zone) })
	if i < 0 {
		return
	}
	var hosts []Host
	if p, err := netip.ParsePrefix(pc.GetAddress()); err == nil {
		self := Host{FQDN: pc.GetFqdn(), IP: p.Addr()}
		if v6, err := compactip.Parse(pc.GetAddressV6()); err == nil {
			self.IPv6 = v6.Addr()
		}
		hosts = append(hosts, self)
	}
	var others []Host
	for _, rp := range nm.GetRemotePeers() {
		if ips := rp.GetAllowedIps(); len(ips) > 0 {
			if p, err := netip.ParsePrefix(ips[0]); err == nil {
				others = append(others, Host{FQDN: rp.GetFqdn(), IP: p.Addr(), IPv6: hostV6(ips)})
			}
		}
	}
	slices.SortStableFunc(others, func(a, b Host) int { return a.IP.Compare(b.IP) })
	z := Peers(domain, append(hosts, others...))
	z.SearchDomainDisabled = nm.DNSConfig.CustomZones[i].GetSearchDomainDisabled()
	z.NonAuthoritative = nm.DNSConfig.CustomZones[i].GetNonAuthoritative()
	nm.DNSConfig.CustomZones[i] = z
}

// hostV6 is the first IPv6 host route (/128) among a peer's allowed IPs.
func hostV6(ips []string) netip.Addr {
	for _, s := range ips {
		if p, err := netip.ParsePrefix(s); err == nil && p.Bits() == 128 && p.Addr().Is6() && !p.Addr().Is4In6() {
			return p.Addr()
		}
	}
	return netip.Addr{}
}
