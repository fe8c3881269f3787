package resolver

import (
	"fmt"
	"net/netip"

	"github.com/miekg/dns"
)

// maxTTL caps record TTLs (a day), here and in the cache.
const maxTTL = 86400

// maxChain bounds a CNAME chain followed inside the zones: longer chains
// (management refuses loops, but a map is still untrusted input) are
// answered SERVFAIL.
const maxChain = 8

// negativeTTL is the TTL and MINIMUM of the SOA in negative answers from
// the zones: how long a client may cache "no such name" (RFC 2308).
const negativeTTL = 60

// zoneData is one zone, built once per configuration and read-only after.
type zoneData struct {
	name    string // canonical: lower-case, final dot
	nonAuth bool
	// rrs holds the records by canonical owner name, then type.
	rrs map[string]map[uint16][]dns.RR
	// exists holds every owner name and each of its ancestors down to the
	// apex: names that exist without records (empty non-terminals) answer
	// NODATA, not NXDOMAIN (RFC 8020).
	exists map[string]bool
	soa    dns.RR
}

// zoneTable is the zones of one configuration, most specific first.
type zoneTable []*zoneData

// buildZones validates zs into a table; what it cannot use is left out
// and described in the returned problems.
func buildZones(zs []Zone) (zoneTable, []string) {
	var problems []string
	byName := map[string]*zoneData{}
	var t zoneTable
	for _, z := range zs {
		name := dns.CanonicalName(z.Domain)
		if !CheckName(name, false) {
			problems = append(problems, fmt.Sprintf("zone %q", z.Domain))
			continue
		}
		zd := byName[name]
		if zd == nil {
			zd = &zoneData{name: name, nonAuth: z.NonAuthoritative, rrs: map[string]map[uint16][]dns.RR{}, exists: map[string]bool{name: true}, soa: soa(name)}
			byName[name] = zd
			t = append(t, zd)
		}
		// Two zones of one name (the peers' and a custom one) are one
		// zone, authoritative if either is.
		zd.nonAuth = zd.nonAuth && z.NonAuthoritative
		for _, r := range z.Records {
			if err := zd.add(r); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	// Most specific zone first: a name belongs to its closest zone.
	for i := 1; i < len(t); i++ {
		for j := i; j > 0 && dns.CountLabel(t[j].name) > dns.CountLabel(t[j-1].name); j-- {
			t[j], t[j-1] = t[j-1], t[j]
		}
	}
	return t, problems
}

// add validates r and adds it to z.
func (z *zoneData) add(r Record) error {
	owner := dns.CanonicalName(r.Name)
	if !CheckName(owner, true) || !dns.IsSubDomain(z.name, owner) {
		return fmt.Errorf("record %q: not a name in zone %s", r.Name, z.name)
	}
	hdr := dns.RR_Header{Name: owner, Rrtype: r.Type, Class: dns.ClassINET, Ttl: min(r.TTL, maxTTL)}
	var rr dns.RR
	switch r.Type {
	case dns.TypeA, dns.TypeAAAA:
		ip, err := netip.ParseAddr(r.Data)
		switch {
		case err != nil:
			return fmt.Errorf("record %q: %w", r.Name, err)
		case r.Type == dns.TypeA && !ip.Unmap().Is4():
			return fmt.Errorf("record %q: A with %s, not an IPv4 address", r.Name, r.Data)
		case r.Type == dns.TypeA:
			rr = &dns.A{Hdr: hdr, A: ip.Unmap().AsSlice()}
		case !ip.Is6() || ip.Is4In6() || ip.Zone() != "":
			return fmt.Errorf("record %q: AAAA with %s, not an IPv6 address", r.Name, r.Data)
		default:
			rr = &dns.AAAA{Hdr: hdr, AAAA: ip.AsSlice()}
		}
	case dns.TypeCNAME:
		target := dns.CanonicalName(r.Data)
		if !CheckName(target, false) || target == owner {
			return fmt.Errorf("record %q: CNAME to %q", r.Name, r.Data)
		}
		if owner == z.name {
			return fmt.Errorf("record %q: a CNAME at the zone apex", r.Name)
		}
		rr = &dns.CNAME{Hdr: hdr, Target: target}
	default:
		return fmt.Errorf("record %q: type %d", r.Name, r.Type)
	}
	types := z.rrs[owner]
	if types == nil {
		types = map[uint16][]dns.RR{}
		z.rrs[owner] = types
	}
	// A CNAME owns its name alone (RFC 1034 3.6.2).
	if _, cname := types[dns.TypeCNAME]; cname || (r.Type == dns.TypeCNAME && len(types) > 0) {
		return fmt.Errorf("record %q: a CNAME and other data at one name", r.Name)
	}
	for _, old := range types[r.Type] {
		if dns.IsDuplicate(old, rr) {
			return nil
		}
	}
	types[r.Type] = append(types[r.Type], rr)
	for n := owner; n != z.name; {
		z.exists[n] = true
		i, _ := dns.NextLabel(n, 0)
		n = n[i:]
	}
	return nil
}

// find is the zone name belongs to (canonical name), or nil.
func (t zoneTable) find(name string) *zoneData {
	for _, z := range t {
		if dns.IsSubDomain(z.name, name) {
			return z
		}
	}
	return nil
}

// zoneAnswer is what the zones say about a question.
type zoneAnswer struct {
	rcode  int
	answer []dns.RR
	ns     []dns.RR
	// external is a CNAME target outside every zone, still to be
	// resolved upstream for qtype; answer holds the chain to it.
	external string
}

// lookup answers qname (as asked) for qtype from the zones. ok is false
// when no zone holds qname, or a non-authoritative zone does not know it:
// then the question goes on to the nameservers.
func (t zoneTable) lookup(qname string, qtype uint16) (za zoneAnswer, ok bool) {
	name := qname
	for depth := 0; ; depth++ {
		z := t.find(dns.CanonicalName(name))
		if z == nil {
			za.external = name
			return za, true
		}
		if depth == maxChain {
			za.rcode = dns.RcodeServerFailure
			return za, true
		}
		types, exists := z.records(dns.CanonicalName(name))
		if !exists {
			if z.nonAuth {
				if depth == 0 {
					return zoneAnswer{}, false
				}
				za.external = name // the chain leads on upstream
				return za, true
			}
			za.rcode, za.ns = dns.RcodeNameError, []dns.RR{z.soa}
			return za, true
		}
		if cn := types[dns.TypeCNAME]; len(cn) > 0 && qtype != dns.TypeCNAME {
			za.answer = append(za.answer, named(cn[0], name))
			name = cn[0].(*dns.CNAME).Target
			continue
		}
		for _, typ := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeCNAME} {
			if typ == qtype || qtype == dns.TypeANY {
				for _, rr := range types[typ] {
					za.answer = append(za.answer, named(rr, name))
				}
			}
		}
		if len(za.answer) == 0 || za.answer[len(za.answer)-1].Header().Rrtype == dns.TypeCNAME && qtype != dns.TypeCNAME {
			za.ns = []dns.RR{z.soa} // NODATA: the name exists, not with this type
		}
		return za, true
	}
}

// records are the records of name (canonical) in z by type, through a
// wildcard at its closest encloser when name itself does not exist.
func (z *zoneData) records(name string) (map[uint16][]dns.RR, bool) {
	if types, ok := z.rrs[name]; ok {
		return types, true
	}
	if z.exists[name] {
		return nil, true // an empty non-terminal
	}
	for n := name; n != z.name; {
		i, _ := dns.NextLabel(n, 0)
		n = n[i:]
		if z.exists[n] || n == z.name {
			types, ok := z.rrs["*."+n]
			return types, ok
		}
	}
	return nil, false
}

// named is a copy of rr owned by name (as asked, or a CNAME's target).
func named(rr dns.RR, name string) dns.RR {
	c := dns.Copy(rr)
	c.Header().Name = name
	return c
}

// soa is the zone's SOA for negative answers (its TTL caps caching).
func soa(zone string) dns.RR {
	return &dns.SOA{
		Hdr: dns.RR_Header{Name: zone, Rrtype: dns.TypeSOA, Class: dns.ClassINET, Ttl: negativeTTL},
		Ns:  "ns." + zone, Mbox: "hostmaster." + zone, Serial: 1, Refresh: 3600, Retry: 600, Expire: 86400, Minttl: negativeTTL,
	}
}
