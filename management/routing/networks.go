package routing

import (
	"context"
	"fmt"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// --- networks ---

// PutNetwork creates (n.ID empty) or replaces a network's name and
// description.
func (s *Service) PutNetwork(ctx context.Context, acc account.ID, n account.Network, initiator string) (account.Network, error) {
	activity := "network.update"
	if n.ID == "" {
		n.ID, activity = account.NetworkID(s.newID()), "network.create"
	}
	n.AccountID = acc
	var err error
	if n.Name, err = cleanName("name", n.Name); err != nil {
		return n, err
	}
	if err := description(n.Description); err != nil {
		return n, err
	}
	err = s.change(ctx, acc, initiator, func(at *store.AccountTx) (event, error) {
		if activity == "network.update" {
			if _, err := at.Network(ctx, n.ID); err != nil {
				return event{}, err
			}
		} else if all, err := at.Networks(ctx); err != nil {
			return event{}, err
		} else if err := full("networks", len(all), MaxNetworks); err != nil {
			return event{}, err
		}
		if err := at.PutNetwork(ctx, n); err != nil {
			return event{}, err
		}
		return event{activity, string(n.ID), map[string]string{"name": n.Name}}, nil
	})
	return n, err
}

// DeleteNetwork removes a network with its resources and routers. It is
// refused while a policy names one of its resources.
func (s *Service) DeleteNetwork(ctx context.Context, acc account.ID, id account.NetworkID, initiator string) error {
	return s.change(ctx, acc, initiator, func(at *store.AccountTx) (event, error) {
		n, err := at.Network(ctx, id)
		if err != nil {
			return event{}, err
		}
		rs, err := at.NetworkResources(ctx)
		if err != nil {
			return event{}, err
		}
		for _, r := range rs {
			if r.NetworkID != id {
				continue
			}
			if err := resourceLinked(ctx, at, r); err != nil {
				return event{}, err
			}
		}
		if err := at.DeleteNetwork(ctx, id); err != nil {
			return event{}, err
		}
		return event{"network.delete", string(id), map[string]string{"name": n.Name}}, nil
	})
}

// resourceLinked refuses to remove a resource a policy rule names as its
// destination: the rule would silently allow nothing.
func resourceLinked(ctx context.Context, at *store.AccountTx, r account.NetworkResource) error {
	ps, err := at.Policies(ctx)
	if err != nil {
		return err
	}
	for _, p := range ps {
		for _, rule := range p.Rules {
			if rule.DestinationResource == r.ID {
				return fmt.Errorf("%w: network resource %s has been linked to policy: %s", ErrInUse, r.Name, p.Name)
			}
		}
	}
	return nil
}

// --- resources ---

// PutResource creates (r.ID empty) or replaces a resource of network
// r.NetworkID. Its type, prefix and domain are derived from r.Address.
func (s *Service) PutResource(ctx context.Context, acc account.ID, r account.NetworkResource, initiator string) (account.NetworkResource, error) {
	activity := "network.resource.update"
	if r.ID == "" {
		r.ID, activity = account.NetworkResourceID(s.newID()), "network.resource.create"
	}
	r.AccountID = acc
	var err error
	if r.Name, err = cleanName("name", r.Name); err != nil {
		return r, err
	}
	if err := description(r.Description); err != nil {
		return r, err
	}
	typ, prefix, domain, err := ParseAddress(r.Address)
	if err != nil {
		return r, invalid("address: %w", err)
	}
	r.Type, r.Prefix, r.Domain = typ, prefix, domain
	err = s.change(ctx, acc, initiator, func(at *store.AccountTx) (event, error) {
		n, err := at.Network(ctx, r.NetworkID)
		if err != nil {
			return event{}, err
		}
		if activity == "network.resource.update" {
			old, err := at.NetworkResource(ctx, r.ID)
			if err != nil {
				return event{}, err
			}
			if old.NetworkID != r.NetworkID {
				return event{}, fmt.Errorf("%w: network resource %s is not in network %s", ErrNotFound, r.ID, r.NetworkID)
			}
		}
		rf, err := loadRefs(ctx, at)
		if err != nil {
			return event{}, err
		}
		if r.Prefix.IsValid() {
			if err := overlay("address", r.Prefix, rf.acct); err != nil {
				return event{}, err
			}
		}
		if r.Groups, err = rf.groupList("groups", r.Groups); err != nil {
			return event{}, err
		}
		rs, err := at.NetworkResources(ctx)
		if err != nil {
			return event{}, err
		}
		if activity == "network.resource.create" {
			if err := full("network resources", len(rs), MaxResources); err != nil {
				return event{}, err
			}
		}
		for _, o := range rs {
			if o.ID != r.ID && o.Name == r.Name {
				return event{}, invalid("name: a resource named %q already exists", r.Name)
			}
		}
		if err := at.PutNetworkResource(ctx, r); err != nil {
			return event{}, err
		}
		return event{activity, string(r.ID), resourceMeta(r, n)}, nil
	})
	return r, err
}

func resourceMeta(r account.NetworkResource, n account.Network) map[string]string {
	return map[string]string{"name": r.Name, "type": r.Type, "network_name": n.Name, "network_id": string(n.ID)}
}

// DeleteResource removes a resource of a network, refused while a policy
// names it.
func (s *Service) DeleteResource(ctx context.Context, acc account.ID, network account.NetworkID, id account.NetworkResourceID, initiator string) error {
	return s.change(ctx, acc, initiator, func(at *store.AccountTx) (event, error) {
		n, err := at.Network(ctx, network)
		if err != nil {
			return event{}, err
		}
		r, err := at.NetworkResource(ctx, id)
		if err != nil {
			return event{}, err
		}
		if r.NetworkID != network {
			return event{}, fmt.Errorf("%w: network resource %s is not in network %s", ErrNotFound, id, network)
		}
		if err := resourceLinked(ctx, at, r); err != nil {
			return event{}, err
		}
		if err := at.DeleteNetworkResource(ctx, id); err != nil {
			return event{}, err
		}
		return event{"network.resource.delete", string(id), resourceMeta(r, n)}, nil
	})
}

// --- routers ---

// PutRouter creates (r.ID empty) or replaces a router of network
// r.NetworkID.
func (s *Service) PutRouter(ctx context.Context, acc account.ID, r account.NetworkRouter, initiator string) (account.NetworkRouter, error) {
	activity := "network.router.update"
	if r.ID == "" {
		r.ID, activity = account.NetworkRouterID(s.newID()), "network.router.create"
	}
	r.AccountID = acc
	err := s.change(ctx, acc, initiator, func(at *store.AccountTx) (event, error) {
		n, err := at.Network(ctx, r.NetworkID)
		if err != nil {
			return event{}, err
		}
		if activity == "network.router.update" {
			old, err := at.NetworkRouter(ctx, r.ID)
			if err != nil {
				return event{}, err
			}
			if old.NetworkID != r.NetworkID {
				return event{}, fmt.Errorf("%w: network router %s is not in network %s", ErrNotFound, r.ID, r.NetworkID)
			}
		}
		rf, err := loadRefs(ctx, at)
		if err != nil {
			return event{}, err
		}
		if err := rf.checkRouter(&r); err != nil {
			return event{}, err
		}
		if activity == "network.router.create" {
			all, err := at.NetworkRouters(ctx)
			if err != nil {
				return event{}, err
			}
			if err := full("network routers", len(all), MaxRouters); err != nil {
				return event{}, err
			}
		}
		all, err := at.NetworkRouters(ctx)
		if err != nil {
			return event{}, err
		}
		if err := rf.duplicateRouter(r, all); err != nil {
			return event{}, err
		}
		if err := at.PutNetworkRouter(ctx, r); err != nil {
			return event{}, err
		}
		return event{activity, string(r.ID), routerMeta(r, n)}, nil
	})
	return r, err
}

func routerMeta(r account.NetworkRouter, n account.Network) map[string]string {
	return map[string]string{"network_name": n.Name, "network_id": string(n.ID), "peer": string(r.Peer), "peer_groups": joinGroups(r.PeerGroups)}
}

func (rf refs) checkRouter(r *account.NetworkRouter) error {
	if err := metric(r.Metric); err != nil {
		return err
	}
	switch {
	case r.Peer != "" && len(r.PeerGroups) > 0:
		return invalid("peer and peer_groups cannot be combined; give one of them")
	case r.Peer == "" && len(r.PeerGroups) == 0:
		return invalid("peer or peer_groups is required: the routing peer, or the groups of routing peers")
	case r.Peer != "":
		r.PeerGroups = []account.GroupID{}
		return rf.peer("peer", r.Peer)
	}
	var err error
	r.PeerGroups, err = rf.routingGroups(r.PeerGroups)
	return err
}

// duplicateRouter refuses a second router of one network with the same
// peer or the same peer group: it would only repeat the first. (A peer
// that is a router by itself and through a group is allowed: groups
// change membership, and clients pick one route per peer anyway.)
func (rf refs) duplicateRouter(r account.NetworkRouter, all []account.NetworkRouter) error {
	for _, o := range all {
		if o.ID == r.ID || o.NetworkID != r.NetworkID {
			continue
		}
		if r.Peer != "" && o.Peer == r.Peer {
			return fmt.Errorf("%w: peer %s is already a router of this network (router %s)", ErrConflict, r.Peer, o.ID)
		}
		for _, g := range r.PeerGroups {
			if slices.Contains(o.PeerGroups, g) {
				return fmt.Errorf("%w: peer group %s is already a router of this network (router %s)", ErrConflict, rf.groups[g].Name, o.ID)
			}
		}
	}
	return nil
}

// DeleteRouter removes a router of a network.
func (s *Service) DeleteRouter(ctx context.Context, acc account.ID, network account.NetworkID, id account.NetworkRouterID, initiator string) error {
	return s.change(ctx, acc, initiator, func(at *store.AccountTx) (event, error) {
		n, err := at.Network(ctx, network)
		if err != nil {
			return event{}, err
		}
		r, err := at.NetworkRouter(ctx, id)
		if err != nil {
			return event{}, err
		}
		if r.NetworkID != network {
			return event{}, fmt.Errorf("%w: network router %s is not in network %s", ErrNotFound, id, network)
		}
		if err := at.DeleteNetworkRouter(ctx, id); err != nil {
			return event{}, err
		}
		return event{"network.router.delete", string(id), routerMeta(r, n)}, nil
	})
}

// --- what other services ask ---

// GroupLinked reports the first route, network resource or network router
// that names group id, as an error wrapping ErrInUse with NetBird's
// message ("group has been linked to route: office"); nil when none does.
// The access service calls it before deleting a group, in its own
// transaction.
func GroupLinked(ctx context.Context, at *store.AccountTx, id account.GroupID) error {
	rs, err := at.Routes(ctx)
	if err != nil {
		return err
	}
	for _, r := range rs {
		if slices.Contains(r.Groups, id) || slices.Contains(r.PeerGroups, id) || slices.Contains(r.AccessControlGroups, id) {
			return fmt.Errorf("%w: group has been linked to route: %s", ErrInUse, r.NetID)
		}
	}
	res, err := at.NetworkResources(ctx)
	if err != nil {
		return err
	}
	for _, r := range res {
		if slices.Contains(r.Groups, id) {
			return fmt.Errorf("%w: group has been linked to network resource: %s", ErrInUse, r.Name)
		}
	}
	rts, err := at.NetworkRouters(ctx)
	if err != nil {
		return err
	}
	for _, r := range rts {
		if slices.Contains(r.PeerGroups, id) {
			return fmt.Errorf("%w: group has been linked to network router: %s", ErrInUse, r.ID)
		}
	}
	return nil
}

// PeerLinked refuses to delete a peer that is a network router by itself,
// as NetBird does ("peer is linked to a network router: <id>"), wrapping
// ErrInUse. Deleting it anyway (a user deletion, an ephemeral cleanup)
// goes through store.DeletePeer, which detaches it from routes and routers.
func PeerLinked(ctx context.Context, at *store.AccountTx, id account.PeerID) error {
	rts, err := at.NetworkRouters(ctx)
	if err != nil {
		return err
	}
	for _, r := range rts {
		if r.Peer == id {
			return fmt.Errorf("%w: peer is linked to a network router: %s", ErrInUse, r.ID)
		}
	}
	return nil
}
