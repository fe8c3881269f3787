package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/routing"
	"github.com/wiremesh/wiremesh/management/store"
)

// The classic routes (/api/routes) and networks (/api/networks, in
// networks.go): reads go to the store, changes through package routing,
// which validates them. Who may do what is the role table's (modules
// routes and networks).

func (a *API) routingRoutes(authed func(string, handler)) {
	authed("GET /api/routes", a.listRoutes)
	authed("POST /api/routes", a.putRoute)
	authed("GET /api/routes/{routeId}", a.getRoute)
	authed("PUT /api/routes/{routeId}", a.putRoute)
	authed("DELETE /api/routes/{routeId}", a.deleteRoute)

	authed("GET /api/networks", a.listNetworks)
	authed("POST /api/networks", a.putNetwork)
	authed("GET /api/networks/routers", a.listAllRouters)
	authed("GET /api/networks/{networkId}", a.getNetwork)
	authed("PUT /api/networks/{networkId}", a.putNetwork)
	authed("DELETE /api/networks/{networkId}", a.deleteNetwork)
	authed("GET /api/networks/{networkId}/resources", a.listResources)
	authed("POST /api/networks/{networkId}/resources", a.putResource)
	authed("GET /api/networks/{networkId}/resources/{resourceId}", a.getResource)
	authed("PUT /api/networks/{networkId}/resources/{resourceId}", a.putResource)
	authed("DELETE /api/networks/{networkId}/resources/{resourceId}", a.deleteResource)
	authed("GET /api/networks/{networkId}/routers", a.listRouters)
	authed("POST /api/networks/{networkId}/routers", a.putRouter)
	authed("GET /api/networks/{networkId}/routers/{routerId}", a.getRouter)
	authed("PUT /api/networks/{networkId}/routers/{routerId}", a.putRouter)
	authed("DELETE /api/networks/{networkId}/routers/{routerId}", a.deleteRouter)
}

// domainPlaceholder is the network NetBird reports for a domain route (a
// documentation address, so that old clients that take it for a prefix
// route nothing real).
const domainPlaceholder = "192.0.2.0/32"

type routeRequest struct {
	Description         string   `json:"description"`
	NetworkID           string   `json:"network_id"`
	Enabled             bool     `json:"enabled"`
	Peer                *string  `json:"peer"`
	PeerGroups          []string `json:"peer_groups"`
	Network             *string  `json:"network"`
	Domains             []string `json:"domains"`
	Metric              int      `json:"metric"`
	Masquerade          bool     `json:"masquerade"`
	Groups              []string `json:"groups"`
	KeepRoute           bool     `json:"keep_route"`
	AccessControlGroups []string `json:"access_control_groups"`
	SkipAutoApply       *bool    `json:"skip_auto_apply"`
}

type routeJSON struct {
	ID                  string    `json:"id"`
	Description         string    `json:"description"`
	NetworkID           string    `json:"network_id"`
	Enabled             bool      `json:"enabled"`
	Peer                string    `json:"peer"`
	PeerGroups          *[]string `json:"peer_groups,omitempty"`
	Network             string    `json:"network"`
	Domains             []string  `json:"domains"`
	NetworkType         string    `json:"network_type"`
	Metric              int       `json:"metric"`
	Masquerade          bool      `json:"masquerade"`
	Groups              []string  `json:"groups"`
	KeepRoute           bool      `json:"keep_route"`
	AccessControlGroups *[]string `json:"access_control_groups,omitempty"`
	SkipAutoApply       bool      `json:"skip_auto_apply"`
}

func groupIDs(ss []string) []account.GroupID {
	out := make([]account.GroupID, 0, len(ss))
	for _, s := range ss {
		out = append(out, account.GroupID(s))
	}
	return out
}

func groupStrings(ids []account.GroupID) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, string(id))
	}
	return out
}

// route converts the request; the domain service checks the rest.
func (req routeRequest) route() (account.Route, error) {
	r := account.Route{Description: req.Description, NetID: req.NetworkID, Enabled: req.Enabled, PeerGroups: groupIDs(req.PeerGroups),
		Domains: req.Domains, Metric: req.Metric, Masquerade: req.Masquerade, Groups: groupIDs(req.Groups), KeepRoute: req.KeepRoute,
		AccessControlGroups: groupIDs(req.AccessControlGroups)}
	if req.Peer != nil {
		r.Peer = account.PeerID(*req.Peer)
	}
	if req.SkipAutoApply != nil {
		r.SkipAutoApply = *req.SkipAutoApply
	}
	if req.Network != nil && *req.Network != "" {
		p, err := netip.ParsePrefix(*req.Network)
		if err != nil {
			return r, routingInvalid("network: %q is not a CIDR prefix (like 10.0.0.0/24)", *req.Network)
		}
		r.Network = p
	}
	return r, nil
}

// routingInvalid is a 422 for a field the domain service never sees
// (it cannot be parsed).
func routingInvalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{routing.ErrInvalid}, args...)...)
}

func toRoute(r account.Route) routeJSON {
	out := routeJSON{ID: string(r.ID), Description: r.Description, NetworkID: r.NetID, Enabled: r.Enabled, Peer: string(r.Peer),
		Domains: r.Domains, Metric: r.Metric, Masquerade: r.Masquerade, Groups: groupStrings(r.Groups), KeepRoute: r.KeepRoute,
		SkipAutoApply: r.SkipAutoApply}
	if out.Domains == nil {
		out.Domains = []string{}
	}
	switch {
	case !r.Network.IsValid():
		out.Network, out.NetworkType = domainPlaceholder, "Domain"
	case r.Network.Addr().Is4():
		out.Network, out.NetworkType = r.Network.String(), "IPv4"
	default:
		out.Network, out.NetworkType = r.Network.String(), "IPv6"
	}
	if len(r.PeerGroups) > 0 {
		pg := groupStrings(r.PeerGroups)
		out.PeerGroups = &pg
	}
	if len(r.AccessControlGroups) > 0 {
		acg := groupStrings(r.AccessControlGroups)
		out.AccessControlGroups = &acg
	}
	return out
}

func (a *API) listRoutes(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var rs []account.Route
	if err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		rs, err = tx.In(caller.AccountID).Routes(r.Context())
		return err
	}); err != nil {
		return err
	}
	out := make([]routeJSON, 0, len(rs))
	for _, rt := range rs {
		out = append(out, toRoute(rt))
	}
	return ok(w, out)
}

func (a *API) getRoute(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var rt account.Route
	if err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		rt, err = tx.In(caller.AccountID).Route(r.Context(), account.RouteID(r.PathValue("routeId")))
		return err
	}); err != nil {
		return err
	}
	return ok(w, toRoute(rt))
}

func (a *API) putRoute(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Routes, writeOp(r)); err != nil {
		return err
	}
	var req routeRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	rt, err := req.route()
	if err != nil {
		return err
	}
	rt.ID = account.RouteID(r.PathValue("routeId"))
	if rt, err = a.o.Routing.PutRoute(r.Context(), caller.AccountID, rt, string(caller.ID)); err != nil {
		return err
	}
	return ok(w, toRoute(rt))
}

func (a *API) deleteRoute(w http.ResponseWriter, r *http.Request, caller account.User) error {
	return adminDelete(w, caller, auth.Routes, func() error {
		return a.o.Routing.DeleteRoute(r.Context(), caller.AccountID, account.RouteID(r.PathValue("routeId")), string(caller.ID))
	})
}
