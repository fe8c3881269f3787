package admin

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/posture"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
)

// validateDump checks an export before it is restored, as the services
// check each object on its way in through the API: names, rules (action,
// protocol, ports), posture checks, and that every reference (group
// members, rule groups and peers, auto-groups, posture checks) names
// something in the dump. Errors wrap access.ErrInvalid.
func validateDump(d store.Dump) error {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: "+format, append([]any{access.ErrInvalid}, args...)...)
	}
	named := func(kind, id, name string) error {
		if n := strings.TrimSpace(name); n == "" || len(n) > 255 {
			return invalid("%s %s: a name must have 1 to 255 characters", kind, id)
		}
		return nil
	}
	peers := map[account.PeerID]bool{}
	for _, p := range d.Peers {
		peers[p.ID] = true
	}
	groups := map[string]bool{}
	all := 0
	for _, g := range d.Groups {
		if err := named("group", string(g.ID), g.Name); err != nil {
			return err
		}
		if g.All {
			all++
		}
		groups[string(g.ID)] = true
		for _, p := range g.Peers {
			if !peers[p] {
				return invalid("group %s: peer %q does not exist", g.ID, p)
			}
		}
	}
	if len(d.Groups) > 0 && all != 1 {
		return invalid("an account has exactly one All group, the dump has %d", all)
	}
	checks := map[string]bool{}
	for _, c := range d.PostureChecks {
		if err := named("posture check", string(c.ID), c.Name); err != nil {
			return err
		}
		if err := posture.Validate(c.Checks); err != nil {
			return invalid("posture check %s: %w", c.ID, err)
		}
		checks[string(c.ID)] = true
	}
	resources := map[account.NetworkResourceID]bool{}
	for _, r := range d.NetworkResources {
		resources[r.ID] = true
	}
	refs := dumpRefs{peers: peers, groups: groups, checks: checks, resources: resources}
	for _, p := range d.Policies {
		// The domain service's own check, on a copy: it fills in rule IDs
		// and names, and the import writes the dump as it is.
		q := p
		q.Rules = slices.Clone(p.Rules)
		if err := access.ValidatePolicy(context.Background(), refs, &q); err != nil {
			return fmt.Errorf("policy %s: %w", p.ID, err)
		}
	}
	for _, k := range d.SetupKeys {
		if k.UsageLimit < 0 || k.UsedTimes < 0 {
			return invalid("setup key %s: negative usage", k.ID)
		}
		if !k.ExpiresAt.IsZero() && k.ExpiresAt.Sub(k.CreatedAt) > setupkey.MaxExpiry {
			return invalid("setup key %s: valid for longer than %v", k.ID, setupkey.MaxExpiry)
		}
		if g := missing(k.AutoGroups, groups); g != "" {
			return invalid("setup key %s: group %q does not exist", k.ID, g)
		}
	}
	for _, u := range d.Users {
		if g := missing(u.AutoGroups, groups); g != "" {
			return invalid("user %s: group %q does not exist", u.ID, g)
		}
	}
	return validateRouting(d, peers, groups, invalid)
}

// validateRouting checks that the dump's routes, network resources and
// routers name peers, groups and networks of the dump.
func validateRouting(d store.Dump, peers map[account.PeerID]bool, groups map[string]bool, invalid func(string, ...any) error) error {
	ids := func(gs []account.GroupID) []string {
		out := make([]string, len(gs))
		for i, g := range gs {
			out[i] = string(g)
		}
		return out
	}
	for _, r := range d.Routes {
		if r.Peer != "" && !peers[r.Peer] {
			return invalid("route %s: peer %q does not exist", r.ID, r.Peer)
		}
		if g := missing(ids(slices.Concat(r.PeerGroups, r.Groups, r.AccessControlGroups)), groups); g != "" {
			return invalid("route %s: group %q does not exist", r.ID, g)
		}
	}
	networks := map[account.NetworkID]bool{}
	for _, n := range d.Networks {
		networks[n.ID] = true
	}
	for _, r := range d.NetworkResources {
		if !networks[r.NetworkID] {
			return invalid("network resource %s: network %q does not exist", r.ID, r.NetworkID)
		}
		if g := missing(ids(r.Groups), groups); g != "" {
			return invalid("network resource %s: group %q does not exist", r.ID, g)
		}
	}
	for _, r := range d.NetworkRouters {
		if !networks[r.NetworkID] {
			return invalid("network router %s: network %q does not exist", r.ID, r.NetworkID)
		}
		if r.Peer != "" && !peers[r.Peer] {
			return invalid("network router %s: peer %q does not exist", r.ID, r.Peer)
		}
		if g := missing(ids(r.PeerGroups), groups); g != "" {
			return invalid("network router %s: group %q does not exist", r.ID, g)
		}
	}
	return validateDNS(d, groups, ids, invalid)
}

// validateDNS checks that the dump's nameserver groups, DNS settings and
// zones name groups of the dump, and each record its own zone.
func validateDNS(d store.Dump, groups map[string]bool, ids func([]account.GroupID) []string, invalid func(string, ...any) error) error {
	for _, g := range d.NameserverGroups {
		if x := missing(ids(g.Groups), groups); x != "" {
			return invalid("nameserver group %s: group %q does not exist", g.ID, x)
		}
	}
	if d.DNSSettings != nil {
		if x := missing(ids(d.DNSSettings.DisabledManagementGroups), groups); x != "" {
			return invalid("dns settings: group %q does not exist", x)
		}
	}
	for _, z := range d.Zones {
		if x := missing(ids(z.DistributionGroups), groups); x != "" {
			return invalid("zone %s: group %q does not exist", z.ID, x)
		}
		for _, r := range z.Records {
			if r.ZoneID != z.ID {
				return invalid("zone %s: record %s names zone %q", z.ID, r.ID, r.ZoneID)
			}
		}
	}
	return nil
}

// missing returns the first ID not in have ("" if none). A dump without
// groups gets the default ones, so nothing can name a group then.
func missing(ids []string, have map[string]bool) string {
	for _, id := range ids {
		if !have[id] {
			return id
		}
	}
	return ""
}

// dumpRefs is access.PolicyRefs over the objects of a dump.
type dumpRefs struct {
	peers          map[account.PeerID]bool
	groups, checks map[string]bool
	resources      map[account.NetworkResourceID]bool
}

func (r dumpRefs) PeerExists(_ context.Context, id account.PeerID) (bool, error) {
	return r.peers[id], nil
}

func (r dumpRefs) GroupExists(_ context.Context, id account.GroupID) (bool, error) {
	return r.groups[string(id)], nil
}

func (r dumpRefs) PostureCheckExists(_ context.Context, id account.PostureCheckID) (bool, error) {
	return r.checks[string(id)], nil
}

func (r dumpRefs) ResourceExists(_ context.Context, id account.NetworkResourceID) (bool, error) {
	return r.resources[id], nil
}
