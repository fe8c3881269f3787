package grpcapi

import (
	"strings"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// NameServer.NSType values, as NetBird numbers them (0 is invalid).
const nsTypeUDP = 1

// defaultDNSPort is used for a nameserver stored without a port.
const defaultDNSPort = 53

// recordClass is the class of every record NetBird sends.
const recordClass = "IN"

// nameserverGroups encodes a map's nameserver groups as NetBird's
// NameServerGroup messages: Primary, match Domains (punycode, as stored)
// and SearchDomainsEnabled as the account holds them.
func nameserverGroups(gs []*account.NameserverGroup) []*mgmtpb.NameServerGroup {
	if len(gs) == 0 {
		return nil
	}
	out := make([]*mgmtpb.NameServerGroup, 0, len(gs))
	for _, g := range gs {
		pg := &mgmtpb.NameServerGroup{Primary: g.Primary, Domains: g.Domains, SearchDomainsEnabled: g.SearchDomainsEnabled,
			NameServers: make([]*mgmtpb.NameServer, 0, len(g.Nameservers))}
		for _, ns := range g.Nameservers {
			if !ns.IP.IsValid() || (ns.NSType != "" && !strings.EqualFold(ns.NSType, "udp")) {
				continue // the official client parses IP with MustParseAddr
			}
			port := ns.Port
			if port <= 0 || port > 65535 {
				port = defaultDNSPort
			}
			pg.NameServers = append(pg.NameServers, &mgmtpb.NameServer{IP: ns.IP.Unmap().String(), NSType: nsTypeUDP, Port: int64(port)})
		}
		if len(pg.NameServers) == 0 {
			continue
		}
		out = append(out, pg)
	}
	return out
}

// recordTypes are the DNS RR types of the record types a zone may hold.
var recordTypes = map[string]uint16{account.RecordA: dns.TypeA, account.RecordAAAA: dns.TypeAAAA, account.RecordCNAME: dns.TypeCNAME}

// customZones encodes a map's custom zones as NetBird's CustomZone
// messages, in the form its management server gives them: the domain and
// every record name with the final dot, a CNAME's target too, class IN,
// SearchDomainDisabled the opposite of the zone's enable_search_domain,
// and NonAuthoritative (a name of the zone without a record is asked
// upstream, unlike in the peer zone).
func customZones(zs []*account.Zone) []*mgmtpb.CustomZone {
	if len(zs) == 0 {
		return nil
	}
	out := make([]*mgmtpb.CustomZone, 0, len(zs))
	for _, z := range zs {
		pz := &mgmtpb.CustomZone{Domain: dns.Fqdn(strings.ToLower(z.Domain)), SearchDomainDisabled: !z.EnableSearchDomain, NonAuthoritative: true,
			Records: make([]*mgmtpb.SimpleRecord, 0, len(z.Records))}
		for _, r := range z.Records {
			t, ok := recordTypes[r.Type]
			if !ok {
				continue // validated on write: an unknown type is not ours to guess
			}
			rdata := r.Content
			if t == dns.TypeCNAME {
				rdata = dns.Fqdn(strings.ToLower(r.Content))
			}
			pz.Records = append(pz.Records, &mgmtpb.SimpleRecord{Name: dns.Fqdn(strings.ToLower(r.Name)), Type: int64(t), Class: recordClass,
				TTL: int64(r.TTL), RData: rdata})
		}
		if len(pz.Records) == 0 {
			continue
		}
		out = append(out, pz)
	}
	return out
}

// accountDNS adds to dc what the account configures for the peer beyond
// its peer zone: custom zones after the peer zone, and nameserver groups.
func accountDNS(dc *mgmtpb.DNSConfig, d networkmap.DNS) {
	dc.CustomZones = append(dc.CustomZones, customZones(d.Zones)...)
	dc.NameServerGroups = nameserverGroups(d.NameserverGroups)
}
