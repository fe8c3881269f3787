package dnsadmin

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/routing"
)

// Limits of NetBird's API, and caps of our own: every nameserver group,
// zone and record goes into the network maps of its peers.
const (
	MaxGroupNameLen   = 40 // a nameserver group's name, in characters
	MaxZoneNameLen    = 255
	MaxDescriptionLen = 1024
	MinNameservers    = 1
	MaxNameservers    = 3
	MaxMatchDomains   = 32
	MaxTTL            = 604800 // a week, in seconds
	MaxRecordContent  = 255

	MaxNameserverGroups = 1024
	MaxZones            = 1024
	MaxRecordsPerZone   = 4096
)

// NSTypeUDP is the only nameserver type NetBird's API has.
const NSTypeUDP = "udp"

// full refuses a creation that would take the account past a cap.
func full(kind string, have, limit int) error {
	if have >= limit {
		return invalid("the account already has %d %s, the most it may have", have, kind)
	}
	return nil
}

// domain checks a match domain, zone domain, record name or CNAME target
// and returns it in lower-case punycode without the final dot. wildcard
// allows a leading "*." (record names only).
func domain(field, d string, wildcard bool) (string, error) {
	if strings.HasPrefix(strings.TrimSpace(d), "*.") && !wildcard {
		return "", invalid("%s: %q: wildcards are not allowed here", field, d)
	}
	n, err := routing.Domain(d)
	if err != nil {
		return "", invalid("%s: %w", field, err)
	}
	return n, nil
}

// under reports whether name is domain itself or a name below it.
func under(name, domain string) bool {
	return name == domain || strings.HasSuffix(name, "."+domain)
}

// groupList refuses an empty list (when required), unknown groups and
// drops repeats.
func (r refs) groupList(field string, ids []account.GroupID, required bool) ([]account.GroupID, error) {
	if required && len(ids) == 0 {
		return nil, invalid("%s: at least one group is required", field)
	}
	out := []account.GroupID{}
	for _, id := range ids {
		if id == "" {
			return nil, invalid("%s: a group ID must not be empty", field)
		}
		if _, ok := r.groups[id]; !ok {
			return nil, invalid("%s: group %q does not exist", field, id)
		}
		if !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// checkNameserverGroup validates a nameserver group and normalizes it in
// place: trimmed name, canonical addresses, punycode domains without
// repeats, group lists without repeats.
func (r refs) checkNameserverGroup(g *account.NameserverGroup, others []account.NameserverGroup) error {
	g.Name = strings.TrimSpace(g.Name)
	if n := utf8.RuneCountInString(g.Name); n < 1 || n > MaxGroupNameLen {
		return invalid("name: must have 1 to %d characters", MaxGroupNameLen)
	}
	for _, o := range others {
		if o.ID != g.ID && o.Name == g.Name {
			return invalid("name: a nameserver group named %q already exists", g.Name)
		}
	}
	if len(g.Description) > MaxDescriptionLen {
		return invalid("description: longer than %d bytes", MaxDescriptionLen)
	}
	if n := len(g.Nameservers); n < MinNameservers || n > MaxNameservers {
		return invalid("nameservers: %d given, a group has %d to %d", n, MinNameservers, MaxNameservers)
	}
	for i := range g.Nameservers {
		if err := r.nameserver(i, &g.Nameservers[i]); err != nil {
			return err
		}
	}
	switch {
	case g.Primary && len(g.Domains) > 0:
		return invalid("primary: a primary nameserver group resolves every domain and cannot have domains; set primary or domains, not both")
	case !g.Primary && len(g.Domains) == 0:
		return invalid("domains: required unless primary is true (the match domains this group resolves)")
	case g.SearchDomainsEnabled && len(g.Domains) == 0:
		return invalid("search_domains_enabled: only a group with domains can add them as search domains")
	case len(g.Domains) > MaxMatchDomains:
		return invalid("domains: %d domains, at most %d", len(g.Domains), MaxMatchDomains)
	}
	ds := make([]string, 0, len(g.Domains))
	for _, d := range g.Domains {
		n, err := domain("domains", d, false)
		if err != nil {
			return err
		}
		if !slices.Contains(ds, n) {
			ds = append(ds, n)
		}
	}
	g.Domains = ds
	var err error
	g.Groups, err = r.groupList("groups", g.Groups, true)
	return err
}

// nameserver checks one upstream: a usable unicast address outside the
// overlay (the overlay's addresses are peers, and the resolver forwards
// through it: a loop), UDP, a valid port.
func (r refs) nameserver(i int, ns *account.Nameserver) error {
	f := fmt.Sprintf("nameservers[%d]", i)
	ip := ns.IP
	switch {
	case !ip.IsValid():
		return invalid("%s.ip: not an IP address", f)
	case ip.Zone() != "":
		return invalid("%s.ip: %s: an address with a zone cannot be used by other peers", f, ip)
	case ip.IsUnspecified(), ip.IsMulticast():
		return invalid("%s.ip: %s is not a unicast address", f, ip)
	case r.acct.Network.IsValid() && r.acct.Network.Contains(ip.Unmap()):
		return invalid("%s.ip: %s is inside the account's peer network %s; a nameserver must be outside it", f, ip, r.acct.Network)
	}
	ns.IP = ip.Unmap()
	if ns.NSType != NSTypeUDP {
		return invalid("%s.ns_type: %q is not supported; the only type is %q", f, ns.NSType, NSTypeUDP)
	}
	if ns.Port < 1 || ns.Port > 65535 {
		return invalid("%s.port: %d is outside 1-65535", f, ns.Port)
	}
	return nil
}

// checkZone validates a zone and normalizes it in place. A zone may not
// take over the peers' own DNS domain (NetBird refuses the same).
func (r refs) checkZone(z *account.Zone, others []account.Zone) error {
	z.Name = strings.TrimSpace(z.Name)
	if n := utf8.RuneCountInString(z.Name); n < 1 || n > MaxZoneNameLen {
		return invalid("name: must have 1 to %d characters", MaxZoneNameLen)
	}
	d, err := domain("domain", z.Domain, false)
	if err != nil {
		return err
	}
	z.Domain = d
	if peers := r.acct.Domain; peers != "" && under(d, strings.ToLower(peers)) {
		return invalid("domain: %s conflicts with the peers' DNS domain %s", d, peers)
	}
	for _, o := range others {
		if o.ID != z.ID && o.Domain == d {
			return fmt.Errorf("%w: zone with domain %s already exists", ErrConflict, d)
		}
	}
	z.DistributionGroups, err = r.groupList("distribution_groups", z.DistributionGroups, true)
	return err
}

// checkRecord validates a record of zone and normalizes it in place. It
// refuses an identical record (ErrConflict), a name that would hold a
// CNAME and any other record, a CNAME pointing at itself and a chain of
// CNAMEs inside the zone that comes back to where it started.
func checkRecord(zone account.Zone, rec *account.Record) error {
	name, err := domain("name", rec.Name, true)
	if err != nil {
		return err
	}
	if !under(strings.TrimPrefix(name, "*."), zone.Domain) {
		return invalid("name: %s is not in the zone %s; give the zone's domain or a name below it", name, zone.Domain)
	}
	rec.Name = name
	if rec.TTL < 0 || rec.TTL > MaxTTL {
		return invalid("ttl: %d is outside 0-%d seconds", rec.TTL, MaxTTL)
	}
	if len(rec.Content) == 0 || len(rec.Content) > MaxRecordContent {
		return invalid("content: must have 1 to %d characters", MaxRecordContent)
	}
	switch rec.Type {
	case account.RecordA, account.RecordAAAA:
		ip, err := netip.ParseAddr(strings.TrimSpace(rec.Content))
		switch {
		case err != nil || ip.Zone() != "":
			return invalid("content: %q is not an IP address", rec.Content)
		case rec.Type == account.RecordA && !ip.Is4():
			return invalid("content: an A record holds an IPv4 address, not %s", ip)
		case rec.Type == account.RecordAAAA && (!ip.Is6() || ip.Is4In6()):
			return invalid("content: an AAAA record holds an IPv6 address, not %s", ip)
		}
		rec.Content = ip.String()
	case account.RecordCNAME:
		target, err := domain("content", rec.Content, false)
		if err != nil {
			return err
		}
		if target == name {
			return invalid("content: a CNAME record cannot point at its own name %s", name)
		}
		rec.Content = target
	default:
		return invalid("type: %q is not supported; use A, AAAA or CNAME", rec.Type)
	}
	return conflicts(zone, *rec)
}

// conflicts checks rec against the zone's other records.
func conflicts(zone account.Zone, rec account.Record) error {
	cnames := map[string]string{}
	for _, o := range zone.Records {
		if o.ID == rec.ID {
			continue
		}
		if o.Name == rec.Name {
			if o.Type == rec.Type && o.Content == rec.Content {
				return fmt.Errorf("%w: an identical %s record for %s already exists", ErrConflict, rec.Type, rec.Name)
			}
			if o.Type == account.RecordCNAME || rec.Type == account.RecordCNAME {
				return invalid("name: %s already has a %s record; a name with a CNAME record can have no other record", rec.Name, o.Type)
			}
		}
		if o.Type == account.RecordCNAME {
			cnames[o.Name] = o.Content
		}
	}
	if rec.Type != account.RecordCNAME {
		return nil
	}
	// Follow the chain from the new CNAME's target through the zone's
	// other CNAMEs; each name holds at most one, so the walk is a path
	// and ends within len(cnames) steps unless it loops.
	cnames[rec.Name] = rec.Content
	seen := map[string]bool{rec.Name: true}
	for at := rec.Content; ; {
		next, ok := cnames[at]
		if !ok {
			return nil
		}
		if seen[at] {
			return invalid("content: %s -> %s makes a CNAME loop through %s", rec.Name, rec.Content, at)
		}
		seen[at] = true
		at = next
		if at == rec.Name {
			return invalid("content: %s -> %s makes a CNAME loop back to %s", rec.Name, rec.Content, rec.Name)
		}
	}
}
