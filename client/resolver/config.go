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

// hostConfig derives what the host must know from cfg. Only names that
// pass CheckName get through, whatever cfg holds: they end up in
// resolv.conf, NetworkManager and systemd-resolved, where a newline or a
// space in a name would be a line or an option of its own.
func hostConfig(server netip.AddrPort, cfg Config) HostConfig {
	hc := HostConfig{Server: server}
	search := map[string]bool{}
	add := func(name string, s bool) {
		if !CheckName(name, false) {
			return
		}
		name = strings.TrimSuffix(strings.ToLower(name), ".")
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

// CheckName reports whether name (final dot optional, not the root) is a
// host-safe domain name: labels of 1..63 letters, digits, '_' or '-', at
// most 253 bytes in all. dns.IsDomainName is not enough here: it accepts
// escaped and raw spaces, newlines and control bytes, and these names are
// written into resolv.conf, the hosts file and D-Bus calls. wildcard
// allows "*" as the whole first label (a zone's wildcard record).
func CheckName(name string, wildcard bool) bool {
	name = strings.TrimSuffix(name, ".")
	if name == "" || len(name) > 253 {
		return false
	}
	if wildcard {
		name = strings.TrimPrefix(name, "*.")
	}
	for label := range strings.SplitSeq(name, ".") {
		if len(label) == 0 || len(label) > 63 {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// HostAddress is one address record of the zones, for a host integration
// that lists names instead of routing queries (the hosts file).
type HostAddress struct {
	Name string // canonical: lower-case, final dot
	Addr netip.Addr
}

// HostAddresses are the A and AAAA records of zs as the resolver itself
// would serve them (the same checks: owner inside its zone, a checked
// name and address), without wildcards, which a hosts file cannot
// express; sorted by name, then address.
func HostAddresses(zs []Zone) []HostAddress {
	t, _ := buildZones(zs)
	var out []HostAddress
	for _, z := range t {
		for owner, types := range z.rrs {
			if strings.HasPrefix(owner, "*.") || t.find(owner) != z {
				continue // a wildcard, or shadowed by a more specific zone
			}
			for _, rr := range append(slices.Clone(types[dns.TypeA]), types[dns.TypeAAAA]...) {
				var a netip.Addr
				switch rr := rr.(type) {
				case *dns.A:
					a, _ = netip.AddrFromSlice(rr.A.To4())
				case *dns.AAAA:
					a, _ = netip.AddrFromSlice(rr.AAAA)
				}
				if a.IsValid() {
					out = append(out, HostAddress{Name: owner, Addr: a})
				}
			}
		}
	}
	slices.SortFunc(out, func(a, b HostAddress) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return a.Addr.Compare(b.Addr)
	})
	return out
}

// nsTypeUDP is NetBird's NameServer.NSType for UDP, the only type it has.
const nsTypeUDP = 1

// ErrSkipped reports parts of a configuration the resolver could not use:
// they are left out and the rest applies.
var ErrSkipped = errors.New("DNS configuration partly not understood")

// Local is what the agent knows of itself that a nameserver from the map
// must not be: its resolver's address and its overlay network.
type Local struct {
	// Self is the resolver's own address (any port of it is refused:
	// forwarding there would loop).
	Self netip.Addr
	// Overlay is the mesh's network; zero skips that check.
	Overlay netip.Prefix
}

// FromProto is Local{}.FromProto: the checks that need no knowledge of
// the agent's own addresses.
func FromProto(p *mgmtpb.DNSConfig) (Config, error) { return Local{}.FromProto(p) }

// FromProto converts management's DNSConfig (the wire form) into a Config.
// The map is untrusted input: parts it cannot use (a zone, record or match
// domain whose name fails CheckName, a nameserver that is not UDP, not an
// IP address or one checkServer refuses, a group with no nameserver, a
// record of a type other than A, AAAA or CNAME) are left out and reported
// in the error, which wraps ErrSkipped; the Config returned is still the
// usable rest. A disabled service is the empty Config.
func (l Local) FromProto(p *mgmtpb.DNSConfig) (Config, error) {
	var cfg Config
	if !p.GetServiceEnable() {
		return cfg, nil
	}
	var problems []string
	for _, cz := range p.GetCustomZones() {
		if !CheckName(cz.GetDomain(), false) {
			problems = append(problems, fmt.Sprintf("zone %q: not a domain name", cz.GetDomain()))
			continue
		}
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
			if !CheckName(r.GetName(), true) || t == int64(dns.TypeCNAME) && !CheckName(r.GetRData(), false) {
				problems = append(problems, fmt.Sprintf("record %q: not a domain name", r.GetName()))
				continue
			}
			z.Records = append(z.Records, Record{Name: r.GetName(), Type: uint16(t), TTL: uint32(min(max(r.GetTTL(), 0), maxTTL)), Data: r.GetRData()})
		}
		cfg.Zones = append(cfg.Zones, z)
	}
	for i, g := range p.GetNameServerGroups() {
		ng := NameserverGroup{Primary: g.GetPrimary(), SearchDomains: g.GetSearchDomainsEnabled()}
		for _, d := range g.GetDomains() {
			if !CheckName(d, false) {
				problems = append(problems, fmt.Sprintf("group %d: match domain %q", i, d))
				continue
			}
			ng.Domains = append(ng.Domains, d)
		}
		if !ng.Primary && len(ng.Domains) == 0 {
			// Every match domain was refused: without this the group
			// would be dropped later anyway; say why here.
			problems = append(problems, fmt.Sprintf("group %d: no usable match domain", i))
			continue
		}
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
			if err := l.checkServer(ip); err != nil {
				problems = append(problems, fmt.Sprintf("nameserver %s of group %d: %v", ip, i, err))
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

// checkServer refuses a nameserver address the resolver must not forward
// to: what management refuses too (unspecified, multicast, zoned, inside
// the overlay), loopback (127.0.0.53 is systemd-resolved, which with a
// primary group's "~." sends everything back here: the host's DNS dies in
// a loop) and the resolver's own address on any port.
func (l Local) checkServer(ip netip.Addr) error {
	ip = ip.Unmap()
	switch {
	case ip.Zone() != "":
		return errors.New("a zoned address")
	case ip.IsUnspecified():
		return errors.New("the unspecified address")
	case ip.IsMulticast() || ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return errors.New("a multicast or broadcast address")
	case ip.IsLoopback():
		return errors.New("a loopback address (the host's own resolver, which may point back here)")
	case l.Self.IsValid() && ip == l.Self.Unmap():
		return errors.New("this agent's own resolver")
	case l.Overlay.IsValid() && l.Overlay.Contains(ip):
		return fmt.Errorf("inside the overlay %s", l.Overlay)
	}
	return nil
}
