package httpapi

import (
	"context"
	"net/http"
	"slices"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
)

// /api/networks: networks, their resources and their routers.

type networkJSON struct {
	ID                string   `json:"id"`
	Name              string   `json:"name"`
	Description       string   `json:"description"`
	Routers           []string `json:"routers"`
	Resources         []string `json:"resources"`
	Policies          []string `json:"policies"`
	RoutingPeersCount int      `json:"routing_peers_count"`
}

type resourceOut struct {
	ID          string         `json:"id"`
	Type        string         `json:"type"`
	Groups      []groupMinimum `json:"groups"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	Address     string         `json:"address"`
	Enabled     bool           `json:"enabled"`
}

type routerJSON struct {
	ID         string   `json:"id"`
	Peer       string   `json:"peer"`
	PeerGroups []string `json:"peer_groups"`
	Metric     int      `json:"metric"`
	Masquerade bool     `json:"masquerade"`
	Enabled    bool     `json:"enabled"`
}

// networkState is what a network's response is computed from, read in
// one transaction.
type networkState struct {
	networks  []account.Network
	resources []account.NetworkResource
	routers   []account.NetworkRouter
	policies  []account.Policy
	groups    map[account.GroupID]account.Group
	peers     map[account.PeerID]bool
}

func (a *API) networkState(ctx context.Context, acc account.ID) (networkState, error) {
	var s networkState
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		var err error
		if s.networks, err = at.Networks(ctx); err != nil {
			return err
		}
		if s.resources, err = at.NetworkResources(ctx); err != nil {
			return err
		}
		if s.routers, err = at.NetworkRouters(ctx); err != nil {
			return err
		}
		if s.policies, err = at.Policies(ctx); err != nil {
			return err
		}
		gs, err := at.Groups(ctx)
		if err != nil {
			return err
		}
		s.groups = make(map[account.GroupID]account.Group, len(gs))
		for _, g := range gs {
			s.groups[g.ID] = g
		}
		ps, err := at.PeerNames(ctx)
		s.peers = make(map[account.PeerID]bool, len(ps))
		for _, p := range ps {
			s.peers[p.ID] = true
		}
		return err
	})
	return s, err
}

// network computes a network's response: its routers and resources, the
// policies whose rules reach its resources (by destination group or as
// the rule's resource), and how many distinct peers route it.
func (s networkState) network(n account.Network) networkJSON {
	out := networkJSON{ID: string(n.ID), Name: n.Name, Description: n.Description, Routers: []string{}, Resources: []string{}, Policies: []string{}}
	routing := map[account.PeerID]bool{}
	for _, r := range s.routers {
		if r.NetworkID != n.ID {
			continue
		}
		out.Routers = append(out.Routers, string(r.ID))
		if r.Peer != "" && s.peers[r.Peer] {
			routing[r.Peer] = true
		}
		for _, g := range r.PeerGroups {
			for p := range s.members(g) {
				routing[p] = true
			}
		}
	}
	out.RoutingPeersCount = len(routing)
	groups := map[account.GroupID]bool{}
	ids := map[account.NetworkResourceID]bool{}
	for _, r := range s.resources {
		if r.NetworkID != n.ID {
			continue
		}
		out.Resources = append(out.Resources, string(r.ID))
		ids[r.ID] = true
		for _, g := range r.Groups {
			groups[g] = true
		}
	}
	for _, p := range s.policies {
		if slices.ContainsFunc(p.Rules, func(r account.Rule) bool {
			return ids[r.DestinationResource] || slices.ContainsFunc(r.Destinations, func(g account.GroupID) bool { return groups[g] })
		}) {
			out.Policies = append(out.Policies, string(p.ID))
		}
	}
	return out
}

// members yields a group's existing peers.
func (s networkState) members(id account.GroupID) map[account.PeerID]bool {
	g, ok := s.groups[id]
	if !ok {
		return nil
	}
	if g.All {
		return s.peers
	}
	out := map[account.PeerID]bool{}
	for _, p := range g.Peers {
		if s.peers[p] {
			out[p] = true
		}
	}
	return out
}

func (a *API) listNetworks(w http.ResponseWriter, r *http.Request, caller account.User) error {
	s, err := a.networkState(r.Context(), caller.AccountID)
	if err != nil {
		return err
	}
	out := make([]networkJSON, 0, len(s.networks))
	for _, n := range s.networks {
		out = append(out, s.network(n))
	}
	return ok(w, out)
}

// oneNetwork answers a network by ID.
func (a *API) oneNetwork(w http.ResponseWriter, r *http.Request, acc account.ID, id account.NetworkID) error {
	s, err := a.networkState(r.Context(), acc)
	if err != nil {
		return err
	}
	for _, n := range s.networks {
		if n.ID == id {
			return ok(w, s.network(n))
		}
	}
	return store.ErrNotFound
}

func (a *API) getNetwork(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return a.oneNetwork(w, r, caller.AccountID, account.NetworkID(r.PathValue("networkId")))
}

func (a *API) putNetwork(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Networks, writeOp(r)); err != nil {
		return err
	}
	var req struct {
		Name        string `json:"name"`
		Description string `json:"description"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	n, err := a.o.Routing.PutNetwork(r.Context(), caller.AccountID, account.Network{ID: account.NetworkID(r.PathValue("networkId")),
		Name: req.Name, Description: req.Description}, string(caller.ID))
	if err != nil {
		return err
	}
	return a.oneNetwork(w, r, caller.AccountID, n.ID)
}

func (a *API) deleteNetwork(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return adminDelete(w, caller, auth.Networks, func() error {
		return a.o.Routing.DeleteNetwork(r.Context(), caller.AccountID, account.NetworkID(r.PathValue("networkId")), string(caller.ID))
	})
}

// --- resources ---

func (v accessView) resource(res account.NetworkResource) resourceOut {
	out := resourceOut{ID: string(res.ID), Type: res.Type, Groups: []groupMinimum{}, Name: res.Name, Description: res.Description,
		Address: res.Domain, Enabled: res.Enabled}
	if res.Type != account.ResourceDomain {
		out.Address = res.Prefix.String()
	}
	for _, g := range res.Groups {
		if m, ok := v.minimum(g); ok {
			out.Groups = append(out.Groups, m)
		}
	}
	return out
}

// networkResources reads a network's resources (ErrNotFound when the
// network is not the account's).
func (a *API) networkResources(ctx context.Context, acc account.ID, id account.NetworkID) ([]account.NetworkResource, error) {
	var out []account.NetworkResource
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		if _, err := at.Network(ctx, id); err != nil {
			return err
		}
		all, err := at.NetworkResources(ctx)
		for _, r := range all {
			if r.NetworkID == id {
				out = append(out, r)
			}
		}
		return err
	})
	return out, err
}

func (a *API) listResources(w http.ResponseWriter, r *http.Request, caller account.User) error {
	rs, err := a.networkResources(r.Context(), caller.AccountID, account.NetworkID(r.PathValue("networkId")))
	if err != nil {
		return err
	}
	v, err := a.accessView(r, caller)
	if err != nil {
		return err
	}
	out := make([]resourceOut, 0, len(rs))
	for _, res := range rs {
		out = append(out, v.resource(res))
	}
	return ok(w, out)
}

func (a *API) getResource(w http.ResponseWriter, r *http.Request, caller account.User) error {
	rs, err := a.networkResources(r.Context(), caller.AccountID, account.NetworkID(r.PathValue("networkId")))
	if err != nil {
		return err
	}
	for _, res := range rs {
		if string(res.ID) == r.PathValue("resourceId") {
			v, err := a.accessView(r, caller)
			if err != nil {
				return err
			}
			return ok(w, v.resource(res))
		}
	}
	return store.ErrNotFound
}

func (a *API) putResource(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Networks, writeOp(r)); err != nil {
		return err
	}
	var req struct {
		Name        string   `json:"name"`
		Description string   `json:"description"`
		Address     string   `json:"address"`
		Enabled     bool     `json:"enabled"`
		Groups      []string `json:"groups"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	res, err := a.o.Routing.PutResource(r.Context(), caller.AccountID, account.NetworkResource{
		ID: account.NetworkResourceID(r.PathValue("resourceId")), NetworkID: account.NetworkID(r.PathValue("networkId")),
		Name: req.Name, Description: req.Description, Address: req.Address, Enabled: req.Enabled, Groups: groupIDs(req.Groups)}, string(caller.ID))
	if err != nil {
		return err
	}
	v, err := a.accessView(r, caller)
	if err != nil {
		return err
	}
	return ok(w, v.resource(res))
}

func (a *API) deleteResource(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return adminDelete(w, caller, auth.Networks, func() error {
		return a.o.Routing.DeleteResource(r.Context(), caller.AccountID, account.NetworkID(r.PathValue("networkId")),
			account.NetworkResourceID(r.PathValue("resourceId")), string(caller.ID))
	})
}

// --- routers ---

func toRouter(rt account.NetworkRouter) routerJSON {
	return routerJSON{ID: string(rt.ID), Peer: string(rt.Peer), PeerGroups: groupStrings(rt.PeerGroups), Metric: rt.Metric, Masquerade: rt.Masquerade, Enabled: rt.Enabled}
}

// routers reads the routers of one network, or of every network (id
// empty); ErrNotFound when the network is not the account's.
func (a *API) routers(ctx context.Context, acc account.ID, id account.NetworkID) ([]routerJSON, error) {
	out := []routerJSON{}
	err := a.o.Store.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc)
		if id != "" {
			if _, err := at.Network(ctx, id); err != nil {
				return err
			}
		}
		all, err := at.NetworkRouters(ctx)
		for _, rt := range all {
			if id == "" || rt.NetworkID == id {
				out = append(out, toRouter(rt))
			}
		}
		return err
	})
	return out, err
}

func (a *API) listAllRouters(w http.ResponseWriter, r *http.Request, caller account.User) error {
	out, err := a.routers(r.Context(), caller.AccountID, "")
	if err != nil {
		return err
	}
	return ok(w, out)
}

func (a *API) listRouters(w http.ResponseWriter, r *http.Request, caller account.User) error {
	out, err := a.routers(r.Context(), caller.AccountID, account.NetworkID(r.PathValue("networkId")))
	if err != nil {
		return err
	}
	return ok(w, out)
}

func (a *API) getRouter(w http.ResponseWriter, r *http.Request, caller account.User) error {
	out, err := a.routers(r.Context(), caller.AccountID, account.NetworkID(r.PathValue("networkId")))
	if err != nil {
		return err
	}
	for _, rt := range out {
		if rt.ID == r.PathValue("routerId") {
			return ok(w, rt)
		}
	}
	return store.ErrNotFound
}

func (a *API) putRouter(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Networks, writeOp(r)); err != nil {
		return err
	}
	var req struct {
		Peer       *string  `json:"peer"`
		PeerGroups []string `json:"peer_groups"`
		Metric     int      `json:"metric"`
		Masquerade bool     `json:"masquerade"`
		Enabled    bool     `json:"enabled"`
	}
	if err := decode(r, &req); err != nil {
		return err
	}
	rt := account.NetworkRouter{ID: account.NetworkRouterID(r.PathValue("routerId")), NetworkID: account.NetworkID(r.PathValue("networkId")),
		PeerGroups: groupIDs(req.PeerGroups), Metric: req.Metric, Masquerade: req.Masquerade, Enabled: req.Enabled}
	if req.Peer != nil {
		rt.Peer = account.PeerID(*req.Peer)
	}
	rt, err := a.o.Routing.PutRouter(r.Context(), caller.AccountID, rt, string(caller.ID))
	if err != nil {
		return err
	}
	return ok(w, toRouter(rt))
}

func (a *API) deleteRouter(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return adminDelete(w, caller, auth.Networks, func() error {
		return a.o.Routing.DeleteRouter(r.Context(), caller.AccountID, account.NetworkID(r.PathValue("networkId")),
			account.NetworkRouterID(r.PathValue("routerId")), string(caller.ID))
	})
}
