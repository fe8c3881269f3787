package httpapi

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/users"
)

// perm is what an authenticated route needs: an operation on a module
// (package auth's role table decides), or only a signed-in caller (self:
// the route acts on the caller alone).
type perm struct {
	module auth.Module
	op     auth.Operation
	self   bool
	// every: the route acts on the account as a whole (no object is the
	// caller's own), so a grant for own objects is not enough.
	every bool
}

func need(m auth.Module, op auth.Operation) perm { return perm{module: m, op: op} }

func needEvery(m auth.Module, op auth.Operation) perm { return perm{module: m, op: op, every: true} }

// routePerms is every authenticated route's permission, keyed as the
// route is registered. A route missing here is refused to every role but
// owner and admin, and TestRouteRoleTable fails until it is added.
// Handlers narrow further where a role's grant covers only the caller's
// own objects (auth.Own): a user's peers and tokens.
var routePerms = map[string]perm{
	"GET /api/instance/version": {self: true},

	"GET /api/users":                                need(auth.Users, auth.Read),
	"POST /api/users":                               need(auth.Users, auth.Create),
	"GET /api/users/current":                        {self: true},
	"GET /api/users/{userId}":                       need(auth.Users, auth.Read),
	"PUT /api/users/{userId}":                       need(auth.Users, auth.Update),
	"DELETE /api/users/{userId}":                    need(auth.Users, auth.Delete),
	"PUT /api/users/{userId}/password":              {self: true},
	"POST /api/users/{userId}/invite":               need(auth.Users, auth.Create),
	"POST /api/users/{userId}/approve":              need(auth.Users, auth.Update),
	"DELETE /api/users/{userId}/reject":             need(auth.Users, auth.Delete),
	"GET /api/users/{userId}/tokens":                need(auth.Pats, auth.Read),
	"POST /api/users/{userId}/tokens":               need(auth.Pats, auth.Create),
	"GET /api/users/{userId}/tokens/{tokenId}":      need(auth.Pats, auth.Read),
	"DELETE /api/users/{userId}/tokens/{tokenId}":   need(auth.Pats, auth.Delete),
	"GET /api/users/invites":                        needEvery(auth.Users, auth.Read),
	"POST /api/users/invites":                       needEvery(auth.Users, auth.Create),
	"DELETE /api/users/invites/{inviteId}":          needEvery(auth.Users, auth.Delete),
	"POST /api/users/invites/{inviteId}/regenerate": needEvery(auth.Users, auth.Create),

	"GET /api/accounts":                need(auth.Settings, auth.Read),
	"PUT /api/accounts/{accountId}":    need(auth.Settings, auth.Update),
	"DELETE /api/accounts/{accountId}": need(auth.Accounts, auth.Delete),

	"GET /api/peers":                           need(auth.Peers, auth.Read),
	"GET /api/peers/{peerId}":                  need(auth.Peers, auth.Read),
	"PUT /api/peers/{peerId}":                  need(auth.Peers, auth.Update),
	"DELETE /api/peers/{peerId}":               need(auth.Peers, auth.Delete),
	"GET /api/peers/{peerId}/accessible-peers": need(auth.Peers, auth.Read),
	// Remote jobs (debug bundles); the bundle download reads as the jobs do.
	"GET /api/peers/{peerId}/jobs":                needEvery(auth.RemoteJobs, auth.Read),
	"POST /api/peers/{peerId}/jobs":               needEvery(auth.RemoteJobs, auth.Create),
	"GET /api/peers/{peerId}/jobs/{jobId}":        needEvery(auth.RemoteJobs, auth.Read),
	"GET /api/peers/{peerId}/jobs/{jobId}/bundle": needEvery(auth.RemoteJobs, auth.Read),
	// A temporary peer is created as peers are (the reference checks
	// peers create), for the account as a whole.
	"POST /api/peers/{peerId}/temporary-access": needEvery(auth.Peers, auth.Create),

	"GET /api/groups":                 need(auth.Groups, auth.Read),
	"POST /api/groups":                need(auth.Groups, auth.Create),
	"GET /api/groups/{groupId}":       need(auth.Groups, auth.Read),
	"PUT /api/groups/{groupId}":       need(auth.Groups, auth.Update),
	"DELETE /api/groups/{groupId}":    need(auth.Groups, auth.Delete),
	"GET /api/policies":               need(auth.Policies, auth.Read),
	"POST /api/policies":              need(auth.Policies, auth.Create),
	"GET /api/policies/{policyId}":    need(auth.Policies, auth.Read),
	"PUT /api/policies/{policyId}":    need(auth.Policies, auth.Update),
	"DELETE /api/policies/{policyId}": need(auth.Policies, auth.Delete),
	// Posture checks belong to policies, as in the reference.
	"GET /api/posture-checks":                     need(auth.Policies, auth.Read),
	"POST /api/posture-checks":                    need(auth.Policies, auth.Create),
	"GET /api/posture-checks/{postureCheckId}":    need(auth.Policies, auth.Read),
	"PUT /api/posture-checks/{postureCheckId}":    need(auth.Policies, auth.Update),
	"DELETE /api/posture-checks/{postureCheckId}": need(auth.Policies, auth.Delete),
	"GET /api/locations/countries":                need(auth.Policies, auth.Read),
	"GET /api/setup-keys":                         need(auth.SetupKeys, auth.Read),
	"POST /api/setup-keys":                        need(auth.SetupKeys, auth.Create),
	"GET /api/setup-keys/{keyId}":                 need(auth.SetupKeys, auth.Read),
	"PUT /api/setup-keys/{keyId}":                 need(auth.SetupKeys, auth.Update),
	"DELETE /api/setup-keys/{keyId}":              need(auth.SetupKeys, auth.Delete),

	"GET /api/routes":                                         need(auth.Routes, auth.Read),
	"POST /api/routes":                                        need(auth.Routes, auth.Create),
	"GET /api/routes/{routeId}":                               need(auth.Routes, auth.Read),
	"PUT /api/routes/{routeId}":                               need(auth.Routes, auth.Update),
	"DELETE /api/routes/{routeId}":                            need(auth.Routes, auth.Delete),
	"GET /api/networks":                                       need(auth.Networks, auth.Read),
	"POST /api/networks":                                      need(auth.Networks, auth.Create),
	"GET /api/networks/routers":                               need(auth.Networks, auth.Read),
	"GET /api/networks/{networkId}":                           need(auth.Networks, auth.Read),
	"PUT /api/networks/{networkId}":                           need(auth.Networks, auth.Update),
	"DELETE /api/networks/{networkId}":                        need(auth.Networks, auth.Delete),
	"GET /api/networks/{networkId}/resources":                 need(auth.Networks, auth.Read),
	"POST /api/networks/{networkId}/resources":                need(auth.Networks, auth.Create),
	"GET /api/networks/{networkId}/resources/{resourceId}":    need(auth.Networks, auth.Read),
	"PUT /api/networks/{networkId}/resources/{resourceId}":    need(auth.Networks, auth.Update),
	"DELETE /api/networks/{networkId}/resources/{resourceId}": need(auth.Networks, auth.Delete),
	"GET /api/networks/{networkId}/routers":                   need(auth.Networks, auth.Read),
	"POST /api/networks/{networkId}/routers":                  need(auth.Networks, auth.Create),
	"GET /api/networks/{networkId}/routers/{routerId}":        need(auth.Networks, auth.Read),
	"PUT /api/networks/{networkId}/routers/{routerId}":        need(auth.Networks, auth.Update),
	"DELETE /api/networks/{networkId}/routers/{routerId}":     need(auth.Networks, auth.Delete),

	// DNS: nameserver groups are module nameservers; the settings and
	// custom zones module dns, as in NetBird.
	"GET /api/dns/nameservers":                          need(auth.Nameservers, auth.Read),
	"POST /api/dns/nameservers":                         need(auth.Nameservers, auth.Create),
	"GET /api/dns/nameservers/{nsgroupId}":              need(auth.Nameservers, auth.Read),
	"PUT /api/dns/nameservers/{nsgroupId}":              need(auth.Nameservers, auth.Update),
	"DELETE /api/dns/nameservers/{nsgroupId}":           need(auth.Nameservers, auth.Delete),
	"GET /api/dns/settings":                             need(auth.DNS, auth.Read),
	"PUT /api/dns/settings":                             need(auth.DNS, auth.Update),
	"GET /api/dns/zones":                                need(auth.DNS, auth.Read),
	"POST /api/dns/zones":                               need(auth.DNS, auth.Create),
	"GET /api/dns/zones/{zoneId}":                       need(auth.DNS, auth.Read),
	"PUT /api/dns/zones/{zoneId}":                       need(auth.DNS, auth.Update),
	"DELETE /api/dns/zones/{zoneId}":                    need(auth.DNS, auth.Delete),
	"GET /api/dns/zones/{zoneId}/records":               need(auth.DNS, auth.Read),
	"POST /api/dns/zones/{zoneId}/records":              need(auth.DNS, auth.Create),
	"GET /api/dns/zones/{zoneId}/records/{recordId}":    need(auth.DNS, auth.Read),
	"PUT /api/dns/zones/{zoneId}/records/{recordId}":    need(auth.DNS, auth.Update),
	"DELETE /api/dns/zones/{zoneId}/records/{recordId}": need(auth.DNS, auth.Delete),

	"GET /api/identity-providers":            need(auth.IdentityProviders, auth.Read),
	"POST /api/identity-providers":           need(auth.IdentityProviders, auth.Create),
	"GET /api/identity-providers/{idpId}":    need(auth.IdentityProviders, auth.Read),
	"PUT /api/identity-providers/{idpId}":    need(auth.IdentityProviders, auth.Update),
	"DELETE /api/identity-providers/{idpId}": need(auth.IdentityProviders, auth.Delete),

	"GET /api/events/audit": need(auth.Events, auth.Read),
	"GET /api/events":       need(auth.Events, auth.Read),
	// Every signed-in caller may stream; the stream tells each only the
	// kinds its role reads (livestream.go).
	"GET /api/events/stream": {self: true},
}

// permOf is a route's permission; ok is false for a route missing from
// routePerms.
func permOf(r Route) (perm, bool) {
	p, ok := routePerms[r.Method+" "+r.Path]
	return p, ok
}

// authorize refuses a caller whose role may not use the route at all.
func authorize(r Route, caller account.User) error {
	p, ok := permOf(r)
	switch {
	case !ok:
		if caller.Role.IsAdmin() {
			return nil
		}
		return fmt.Errorf("%w: %s %s has no permission entry; only owners and admins may use it", users.ErrForbidden, r.Method, r.Path)
	case p.self:
		return nil
	case p.every:
		return requireAll(caller, p.module, p.op)
	}
	return require(caller, p.module, p.op)
}

// require refuses the caller unless its role grants op on module, at
// least for its own objects.
func require(caller account.User, m auth.Module, op auth.Operation) error {
	if auth.Can(caller, m, op) == auth.None {
		return fmt.Errorf("%w: the %s role may not %s %s", users.ErrForbidden, caller.Role, op, strings.ReplaceAll(string(m), "_", " "))
	}
	return nil
}

// requireAll refuses the caller unless its role grants op on every object
// of module.
func requireAll(caller account.User, m auth.Module, op auth.Operation) error {
	if auth.Can(caller, m, op) != auth.All {
		return fmt.Errorf("%w: the %s role may not %s %s", users.ErrForbidden, caller.Role, op, strings.ReplaceAll(string(m), "_", " "))
	}
	return nil
}

// seesAll reports whether the caller reads every object of module (not
// only its own).
func seesAll(caller account.User, m auth.Module) bool {
	return auth.Can(caller, m, auth.Read) == auth.All
}

// permissions is the User object's permissions: per module and operation
// whether the caller may use it on this server. A module or operation no
// route serves (billing, reverse-proxy services, identity
// provider connectors, agent network...) is reported false whatever the
// role, so the dashboard does not offer pages this server cannot serve.
type permissions struct {
	IsRestricted bool                       `json:"is_restricted"`
	Modules      map[string]map[string]bool `json:"modules"`
}

// served is the module operations some route of the API serves.
func (a *API) served() map[auth.Module]map[auth.Operation]bool {
	out := map[auth.Module]map[auth.Operation]bool{}
	for _, rt := range a.table {
		p, ok := permOf(rt.Route)
		if !ok || p.self || rt.Public {
			continue
		}
		if out[p.module] == nil {
			out[p.module] = map[auth.Operation]bool{}
		}
		out[p.module][p.op] = true
	}
	return out
}

// permissionsOf reports what u may do here. A user (or billing admin) is
// restricted when the account's regular_users_view_blocked is on.
func (a *API) permissionsOf(u account.User, s account.Settings) *permissions {
	p := &permissions{IsRestricted: auth.Restricted(u.Role) && s.RegularUsersViewBlocked, Modules: map[string]map[string]bool{}}
	served := a.served()
	for _, m := range auth.Modules {
		ops := map[string]bool{}
		for _, op := range auth.Operations {
			ops[string(op)] = served[m][op] && auth.Can(u, m, op) != auth.None
		}
		p.Modules[string(m)] = ops
	}
	return p
}

// writeOp is the operation of a create-or-replace handler: POST creates,
// PUT updates.
func writeOp(r *http.Request) auth.Operation {
	if r.Method == http.MethodPost {
		return auth.Create
	}
	return auth.Update
}
