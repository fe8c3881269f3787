package routing

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// PutRoute creates (r.ID empty) or replaces a route after validating it
// against the account. It returns the route as stored.
func (s *Service) PutRoute(ctx context.Context, acc account.ID, r account.Route, initiator string) (account.Route, error) {
	activity := "route.update"
	if r.ID == "" {
		r.ID, activity = account.RouteID(s.newID()), "route.add"
	}
	r.AccountID = acc
	if err := description(r.Description); err != nil {
		return r, err
	}
	err := s.change(ctx, acc, initiator, func(at *store.AccountTx) (event, error) {
		if activity == "route.update" {
			if _, err := at.Route(ctx, r.ID); err != nil {
				return event{}, err
			}
		}
		rf, err := loadRefs(ctx, at)
		if err != nil {
			return event{}, err
		}
		if err := rf.checkRoute(&r); err != nil {
			return event{}, err
		}
		others, err := at.Routes(ctx)
		if err != nil {
			return event{}, err
		}
		if activity == "route.add" {
			if err := full("routes", len(others), MaxRoutes); err != nil {
				return event{}, err
			}
		}
		if err := rf.duplicate(r, others); err != nil {
			return event{}, err
		}
		if err := at.PutRoute(ctx, r); err != nil {
			return event{}, err
		}
		return event{activity, string(r.ID), routeMeta(r)}, nil
	})
	return r, err
}

// DeleteRoute removes a route.
func (s *Service) DeleteRoute(ctx context.Context, acc account.ID, id account.RouteID, initiator string) error {
	return s.change(ctx, acc, initiator, func(at *store.AccountTx) (event, error) {
		r, err := at.Route(ctx, id)
		if err != nil {
			return event{}, err
		}
		if err := at.DeleteRoute(ctx, id); err != nil {
			return event{}, err
		}
		return event{"route.delete", string(id), routeMeta(r)}, nil
	})
}

// routeMeta is what the activity log shows of a route, as NetBird's
// route events carry it.
func routeMeta(r account.Route) map[string]string {
	m := map[string]string{"name": r.NetID, "domains": strings.Join(r.Domains, ", "), "peer_id": string(r.Peer), "peer_groups": joinGroups(r.PeerGroups)}
	if r.Network.IsValid() {
		m["network_range"] = r.Network.String()
	}
	return m
}

// checkRoute validates a route and normalizes it in place: domains in
// punycode, group lists without repeats, empty lists rather than nil.
func (rf refs) checkRoute(r *account.Route) error {
	if n := utf8.RuneCountInString(r.NetID); n < 1 || n > MaxNetIDLen {
		return invalid("network_id: must have 1 to %d characters", MaxNetIDLen)
	}
	if err := metric(r.Metric); err != nil {
		return err
	}
	switch {
	case r.Peer != "" && len(r.PeerGroups) > 0:
		return invalid("peer and peer_groups cannot be combined; give one of them")
	case r.Peer == "" && len(r.PeerGroups) == 0:
		return invalid("peer or peer_groups is required: the routing peer, or the groups of routing peers")
	case r.Peer != "":
		if err := rf.peer("peer", r.Peer); err != nil {
			return err
		}
		r.PeerGroups = []account.GroupID{}
	default:
		var err error
		if r.PeerGroups, err = rf.routingGroups(r.PeerGroups); err != nil {
			return err
		}
	}
	switch {
	case r.Network.IsValid() && len(r.Domains) > 0:
		return invalid("network and domains cannot be combined; give one of them")
	case !r.Network.IsValid() && len(r.Domains) == 0:
		return invalid("network or domains is required")
	case r.Network.IsValid():
		if r.Network != r.Network.Masked() {
			return invalid("network: %s has host bits set; did you mean %s?", r.Network, r.Network.Masked())
		}
		if err := overlay("network", r.Network, rf.acct); err != nil {
			return err
		}
		r.Domains = []string{}
	default:
		if len(r.Domains) > MaxDomains {
			return invalid("domains: %d domains, at most %d", len(r.Domains), MaxDomains)
		}
		ds := make([]string, 0, len(r.Domains))
		for _, d := range r.Domains {
			n, err := Domain(d)
			if err != nil {
				return invalid("domains: %w", err)
			}
			if !slices.Contains(ds, n) {
				ds = append(ds, n)
			}
		}
		r.Domains = ds
	}
	if r.SkipAutoApply && !r.IsExitNode() {
		return invalid("skip_auto_apply: only exit node routes (0.0.0.0/0 or ::/0) can skip auto-apply")
	}
	if len(r.Groups) == 0 {
		return invalid("groups: the distribution groups (the peers that get the route) must not be empty")
	}
	var err error
	if r.Groups, err = rf.groupList("groups", r.Groups); err != nil {
		return err
	}
	r.AccessControlGroups, err = rf.groupList("access_control_groups", r.AccessControlGroups)
	return err
}

// duplicate refuses a route whose destination (the same prefix, or the
// same domains) another route already has through one of the same routing
// peers, as NetBird does: a peer cannot route one destination twice,
// whatever network_id the routes have. Routes to the same destination
// through different peers are the high-availability case and fine.
func (rf refs) duplicate(r account.Route, others []account.Route) error {
	seenPeers := map[account.PeerID]string{}
	seenGroups := map[account.GroupID]string{}
	for _, o := range others {
		if o.ID == r.ID || !sameDestination(o, r) {
			continue
		}
		if o.Peer != "" {
			seenPeers[o.Peer] = o.NetID
		}
		for _, g := range o.PeerGroups {
			seenGroups[g] = o.NetID
			for _, p := range rf.members(g) {
				seenPeers[p] = o.NetID
			}
		}
	}
	what := describe(r)
	if netID, ok := seenPeers[r.Peer]; r.Peer != "" && ok {
		return fmt.Errorf("%w: failed to add route with %s - peer %s already has this route (route %s)", ErrConflict, what, r.Peer, netID)
	}
	for _, g := range r.PeerGroups {
		if netID, ok := seenGroups[g]; ok {
			return fmt.Errorf("%w: failed to add route with %s - peer group %s already has this route (route %s)", ErrConflict, what, rf.groups[g].Name, netID)
		}
		for _, p := range rf.members(g) {
			if netID, ok := seenPeers[p]; ok {
				return fmt.Errorf("%w: failed to add route with %s - peer %s from the group %s already has this route (route %s)", ErrConflict, what, p, rf.groups[g].Name, netID)
			}
		}
	}
	return nil
}

func sameDestination(a, b account.Route) bool {
	if a.Network.IsValid() || b.Network.IsValid() {
		return a.Network == b.Network
	}
	x, y := slices.Clone(a.Domains), slices.Clone(b.Domains)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func describe(r account.Route) string {
	if r.Network.IsValid() {
		return "prefix " + r.Network.String()
	}
	return "domains " + strings.Join(r.Domains, ", ")
}

func joinGroups(ids []account.GroupID) string {
	ss := make([]string, len(ids))
	for i, id := range ids {
		ss[i] = string(id)
	}
	return strings.Join(ss, ", ")
}
