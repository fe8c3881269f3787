package networkmap

import (
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
)

// DNS, as NetBird's management server delivers it (so that official
// clients resolve the same names through our server). What a peer gets:
//
//   - Nothing at all (DNS.Managed false: ServiceEnable off, no peer zone,
//     no nameservers, no custom zones) when it is in one of the groups of
//     the account's DNS settings' disabled_management_groups: its client
//     leaves the host's DNS alone.
//   - Otherwise the peer zone (the names of the peers it may reach, built
//     at the boundary from Map.Peers), then the account's custom zones it
//     gets, then its nameserver groups.
//   - A nameserver group when it is enabled, has nameservers, and one of
//     its distribution groups holds the peer, unless the peer is itself one
//     of the group's nameservers (it would ask itself).
//   - A custom zone when it is enabled, has records, and one of its
//     distribution groups holds the peer.
//
// Both lists keep the account's (the store's) order. Peers pending
// approval belong to no group, so they get neither; temporary peers only
// through the groups that name them explicitly.

// DNS is the DNS configuration of one peer's map.
type DNS struct {
	// Managed is NetBird's ServiceEnable: false for a peer whose DNS the
	// account leaves unmanaged, which then gets nothing else.
	Managed bool
	// NameserverGroups and Zones point into the Index they came from,
	// which is never changed: do not modify them.
	NameserverGroups []*account.NameserverGroup
	Zones            []*account.Zone
}

// dnsIndex is the DNS part of an Index.
type dnsIndex struct {
	// config is what the account holds, for PeerLocal.
	nsgroups []account.NameserverGroup // enabled, with nameservers
	zones    []account.Zone            // enabled, with records
	disabled []account.GroupID
	groups   map[account.GroupID]map[account.PeerID]bool
	// nsSig and zoneSig summarize each group and zone as sent.
	nsSig, zoneSig []sig128
}

// empty reports whether the account configures no DNS beyond the peer zone.
func (d *dnsIndex) empty() bool {
	return len(d.nsgroups) == 0 && len(d.zones) == 0 && len(d.disabled) == 0
}

// buildDNS prepares the DNS of access; members are the resolved groups.
func (ix *Index) buildDNS(access Access, members map[account.GroupID]map[account.PeerID]bool) {
	d := &ix.dns
	d.groups = map[account.GroupID]map[account.PeerID]bool{}
	note := func(gs []account.GroupID) {
		for _, g := range gs {
			d.groups[g] = members[g]
		}
	}
	d.disabled = access.DNSSettings.DisabledManagementGroups
	note(d.disabled)
	for _, g := range access.NameserverGroups {
		if !g.Enabled || len(g.Nameservers) == 0 || len(g.Groups) == 0 {
			continue
		}
		note(g.Groups)
		d.nsgroups = append(d.nsgroups, g)
		d.nsSig = append(d.nsSig, newSig(string(g.ID), fmt.Sprintf("%+v|%t|%q|%t", g.Nameservers, g.Primary, g.Domains, g.SearchDomainsEnabled)))
	}
	for _, z := range access.Zones {
		if !z.Enabled || len(z.Records) == 0 || len(z.DistributionGroups) == 0 {
			continue
		}
		note(z.DistributionGroups)
		d.zones = append(d.zones, z)
		d.zoneSig = append(d.zoneSig, newSig(string(z.ID), z.Domain, fmt.Sprintf("%t|%+v", z.EnableSearchDomain, z.Records)))
	}
}

// in reports whether one of gs holds the peer.
func (d *dnsIndex) in(gs []account.GroupID, self account.PeerID) bool {
	for _, g := range gs {
		if d.groups[g][self] {
			return true
		}
	}
	return false
}

// isNameserver reports whether one of self's addresses (its v6 one when
// it is v6-active) is one of g's nameservers.
func (ix *Index) isNameserver(g *account.NameserverGroup, self account.PeerID) bool {
	p := ix.byID[self]
	for _, ns := range g.Nameservers {
		if ns.IP == p.IP || ix.v6[self] && ns.IP == p.IPv6 {
			return true
		}
	}
	return false
}

// dnsOf is self's DNS configuration (see above); self must be in ix.
func (ix *Index) dnsOf(self account.PeerID) DNS {
	d := &ix.dns
	if d.in(d.disabled, self) {
		return DNS{}
	}
	out := DNS{Managed: true}
	for i := range d.nsgroups {
		if g := &d.nsgroups[i]; d.in(g.Groups, self) && !ix.isNameserver(g, self) {
			out.NameserverGroups = append(out.NameserverGroups, g)
		}
	}
	for i := range d.zones {
		if z := &d.zones[i]; d.in(z.DistributionGroups, self) {
			out.Zones = append(out.Zones, z)
		}
	}
	return out
}

var sigManaged, sigUnmanaged = newSig("dns-managed"), newSig("dns-unmanaged")

// dnsSig summarizes self's DNS configuration, in order: the same
// groups and zones in another order give another signature.
func (ix *Index) dnsSig(self account.PeerID) sig128 {
	d := &ix.dns
	if d.in(d.disabled, self) {
		return sigUnmanaged
	}
	h := sigManaged
	for i := range d.nsgroups {
		if g := &d.nsgroups[i]; d.in(g.Groups, self) && !ix.isNameserver(g, self) {
			h = h.mix(10).add(d.nsSig[i])
		}
	}
	for i := range d.zones {
		if d.in(d.zones[i].DistributionGroups, self) {
			h = h.mix(11).add(d.zoneSig[i])
		}
	}
	return h
}

// dnsChanged lists the peers of both states, not in skip, whose DNS
// configuration differs between them: a change of a nameserver group, a
// zone, the DNS settings or a membership in the groups they name.
func dnsChanged(old, cur *Index, skip map[account.PeerID]bool) []account.PeerID {
	if old.dns.empty() && cur.dns.empty() {
		return nil
	}
	var out []account.PeerID
	for id := range cur.byID {
		if skip[id] || !old.Has(id) {
			continue
		}
		if old.dnsSig(id) != cur.dnsSig(id) {
			out = append(out, id)
		}
	}
	return out
}
