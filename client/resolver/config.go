package resolver

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Config is everything management tells the resolver: the zones it answers
// itself and the nameserver groups it forwards to. The host's original
// servers are not part of it (SetUpstreams), since they come from the host.
type Config struct {
	Zones  []Zone
	Groups []NameserverGroup
}

// Zone is a zone answered here (a custom zone or the peers' zone).
type Zone struct {
	Domain  string // any case, final dot optional
	Records []Record
	// Search puts Domain in the host's search list.
	Search bool
	// NonAuthoritative zones hand a name they do not hold to the
	// nameserver groups and the host's servers instead of answering
	// NXDOMAIN.
	NonAuthoritative bool
}

// Record is one record of a zone: A (Data an IPv4 address), AAAA (an IPv6
// address) or CNAME (Data a domain name).
type Record struct {
	Name string
	Type uint16
	TTL  uint32
	Data string
}

// NameserverGroup forwards the questions under Domains (split DNS), or,
// when Primary, every question no zone or other group takes, to Servers
// in order.
type NameserverGroup struct {
	Servers []netip.AddrPort
	Primary bool
	Domains []string
	// SearchDomains puts Domains in the host's search list.
	SearchDomains bool
}

// HostConfig is what the host's resolver should be told so that questions
// reach this one: the contract between the resolver and the per-system
// host integration (systemd-resolved, NetworkManager, resolv.conf,
// /etc/hosts, scutil, NRPT).
type HostConfig struct {
	// Server is where the resolver listens (zero before Listen).
	Server netip.AddrPort
	// Primary: a primary nameserver group exists, so every question
	// belongs here (systemd-resolved "~.", the first nameserver in
	// resolv.conf). Without it only Domains do, and the host keeps its
	// own servers for the rest (the resolver forwards there too, so
	// pointing everything here is still correct, merely not required).
	Primary bool
	// Domains are the domains whose questions must reach the resolver:
	// its zones and the groups' match domains, lower-case, without the
	// final dot, sorted and unique.
	Domains []HostDomain
}

// HostDomain is one domain of HostConfig.
type HostDomain struct {
	Name string
	// Search: the domain goes in the host's search list too, not only in
	// its routing (match) domains.
	Search bool
}

// MatchDomains are all of c's domains (systemd-resolved routing domains
// "~name", NRPT rules, scutil SupplementalMatchDomains).
func (c HostConfig) MatchDomains() []string {
	out := make([]string, 0, len(c.Domains))
	for _, d := range c.Domains {
		out = append(out, d.Name)
	}
	return out
}

// SearchDomains are the domains of c that go in the host's search list.
func (c HostConfig) SearchDomains() []string {
	var out []string
	for _, d := range c.Domains {
		if d.Search {
			out = append(out, d.Name)
		}
	}
	return out
}

// Equal reports whether c and o tell the host the same thing.
func (c HostConfig) Equal(o HostConfig) bool {
	return c.Server == o.Server && c.Primary == o.Primary && slices.Equal(c.Domains, o.Domains)
}

// hostConfig derives what the host must know from cfg.
func hostConfig(server netip.AddrPort, cfg Config) HostConfig {
	hc := HostConfig{Server: server}
	search := map[string]bool{}
	add := func(name string, s bool) {
		name = strings.TrimSuffix(strings.ToLower(name), ".")
		if name == "" {
			return
		}
		search[name] = search[name] || s
	}
	for _, z := range cfg.Zones {
		add(z.Domain, z.Search)
	}
	for _, g := range cfg.Groups {
		if len(g.Servers) == 0 {
			continue
		}
		if g.Primary {
			hc.Primary = true
		}
		for _, d := range g.Domains {
			add(d, g.SearchDomains)
		}
	}
	for name, s := range search {
		hc.Domains = append(hc.Domains, HostDomain{Name: name, Search: s})
	}
	slices.SortFunc(hc.Domains, func(a, b HostDomain) int { return strings.Compare(a.Name, b.Name) })
	return hc
}

// nsTypeUDP is NetBird's NameServer.NSType for UDP, the only type it has.
const nsTypeUDP = 1

// ErrSkipped reports parts of a configuration the resolver could not use:
// they are left out and the rest applies.
var ErrSkipped = errors.New("DNS configuration partly not understood")

// FromProto converts management's DNSConfig (the wire form) into a Config.
// Parts it cannot use (a nameserver that is not UDP or not an IP address,
// a group with no nameserver, a record of a type other than A, AAAA or
// CNAME) are left out and reported in the error, which wraps ErrSkipped;
// the Config returned is still the usable rest. A disabled service is the
// empty Config.
func FromProto(p *mgmtpb.DNSConfig) (Config, error) {
	var cfg Config
	if !p.GetServiceEnable() {
		return cfg, nil
	}
	var problems []string
	for _, cz := range p.GetCustomZones() {
		z := Zone{Domain: cz.GetDomain(), Search: !cz.GetSearchDomainDisabled(), NonAuthoritative: cz.GetNonAuthoritative()}
		for _, r := range cz.GetRecords() {
			t := r.GetType()
			if t != int64(dns.TypeA) && t != int64(dns.TypeAAAA) && t != int64(dns.TypeCNAME) {
				problems = append(problems, fmt.Sprintf("record %q of type %d", r.GetName(), t))
				continue
			}
			if c := r.GetClass(); c != "" && !strings.EqualFold(c, "IN") {
				problems = append(problems, fmt.Sprintf("record %q of class %q", r.GetName(), c))
				continue
			}
			z.Records = append(z.Records, Record{Name: r.GetName(), Type: uint16(t), TTL: uint32(min(max(r.GetTTL(), 0), maxTTL)), Data: r.GetRData()})
		}
		cfg.Zones = append(cfg.Zones, z)
	}
	for i, g := range p.GetNameServerGroups() {
		ng := NameserverGroup{Primary: g.GetPrimary(), Domains: g.GetDomains(), SearchDomains: g.GetSearchDomainsEnabled()}
		for _, ns := range g.GetNameServers() {
			ip, err := netip.ParseAddr(ns.GetIP())
			port := ns.GetPort()
			if port == 0 {
				port = 53
			}
			if err != nil || ns.GetNSType() != nsTypeUDP || port < 1 || port > 65535 {
				problems = append(problems, fmt.Sprintf("nameserver %q (type %d, port %d) of group %d", ns.GetIP(), ns.GetNSType(), ns.GetPort(), i))
				continue
			}
			ng.Servers = append(ng.Servers, netip.AddrPortFrom(ip.Unmap(), uint16(port)))
		}
		if len(ng.Servers) == 0 {
			problems = append(problems, fmt.Sprintf("group %d has no usable nameserver", i))
			continue
		}
		cfg.Groups = append(cfg.Groups, ng)
	}
	if len(problems) > 0 {
		return cfg, fmt.Errorf("%w: %s", ErrSkipped, strings.Join(problems, "; "))
	}
	return cfg, nil
}
