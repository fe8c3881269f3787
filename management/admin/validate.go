package admin

import (
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
	for _, p := range d.Policies {
		if err := validatePolicy(p, peers, groups, checks); err != nil {
			return invalid("policy %s: %w", p.ID, err)
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

func validatePolicy(p account.Policy, peers map[account.PeerID]bool, groups, checks map[string]bool) error {
	if n := strings.TrimSpace(p.Name); n == "" || len(n) > 255 {
		return fmt.Errorf("a name must have 1 to 255 characters")
	}
	if len(p.Rules) == 0 {
		return fmt.Errorf("a policy needs at least one rule")
	}
	for _, r := range p.Rules {
		if r.Action != account.ActionAccept && r.Action != account.ActionDrop {
			return fmt.Errorf("rule action %q (want accept or drop)", r.Action)
		}
		if !slices.Contains([]string{account.ProtoAll, account.ProtoTCP, account.ProtoUDP, account.ProtoICMP}, r.Protocol) {
			return fmt.Errorf("rule protocol %q (want all, tcp, udp or icmp)", r.Protocol)
		}
		if len(r.Ports) > 0 && len(r.PortRanges) > 0 {
			return fmt.Errorf("ports and port_ranges cannot be combined")
		}
		if (len(r.Ports) > 0 || len(r.PortRanges) > 0) && r.Protocol != account.ProtoTCP && r.Protocol != account.ProtoUDP {
			return fmt.Errorf("ports need protocol tcp or udp")
		}
		for _, pr := range r.PortRanges {
			if pr.Start == 0 || pr.End < pr.Start {
				return fmt.Errorf("port range %d-%d", pr.Start, pr.End)
			}
		}
		if (len(r.Sources) == 0) == (r.SourcePeer == "") || (len(r.Destinations) == 0) == (r.DestinationPeer == "") {
			return fmt.Errorf("each side of a rule needs either groups or a single peer resource")
		}
		for _, id := range []account.PeerID{r.SourcePeer, r.DestinationPeer} {
			if id != "" && !peers[id] {
				return fmt.Errorf("peer %q does not exist", id)
			}
		}
		for _, g := range append(slices.Clone(r.Sources), r.Destinations...) {
			if !groups[string(g)] {
				return fmt.Errorf("group %q does not exist", g)
			}
		}
	}
	if c := missing(p.PostureChecks, checks); c != "" {
		return fmt.Errorf("posture check %q does not exist", c)
	}
	return nil
}
