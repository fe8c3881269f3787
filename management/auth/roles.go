package auth

import "github.com/wiremesh/wiremesh/management/account"

// Module is an area of the management API that a role grants access to
// (the reference's permission modules, by the same names).
type Module string

// The modules, in the order the API lists them.
const (
	Networks          Module = "networks"
	Peers             Module = "peers"
	RemoteJobs        Module = "remote_jobs"
	Groups            Module = "groups"
	Settings          Module = "settings"
	Accounts          Module = "accounts"
	DNS               Module = "dns"
	Nameservers       Module = "nameservers"
	Events            Module = "events"
	Policies          Module = "policies"
	Routes            Module = "routes"
	Users             Module = "users"
	SetupKeys         Module = "setup_keys"
	Pats              Module = "pats"
	IdentityProviders Module = "identity_providers"
	Services          Module = "services"
	AgentNetwork      Module = "agent_network"
)

// Modules lists every module.
var Modules = []Module{Networks, Peers, RemoteJobs, Groups, Settings, Accounts, DNS, Nameservers, Events, Policies, Routes,
	Users, SetupKeys, Pats, IdentityProviders, Services, AgentNetwork}

// Operation is what is done to a module's objects.
type Operation string

// The operations.
const (
	Read   Operation = "read"
	Create Operation = "create"
	Update Operation = "update"
	Delete Operation = "delete"
)

// Operations lists every operation.
var Operations = []Operation{Read, Create, Update, Delete}

// Scope is how far a grant reaches.
type Scope uint8

// The scopes.
const (
	// None: refused.
	None Scope = iota
	// Own: only the caller's own objects (its user record, the peers it
	// added, its personal access tokens).
	Own
	// All: every object of the account.
	All
)

// grants is one role's table: per module, per operation, a scope; a
// module the role does not list gets otherwise.
type grants struct {
	modules   map[Module]map[Operation]Scope
	otherwise map[Operation]Scope
}

func ops(read, create, update, del Scope) map[Operation]Scope {
	return map[Operation]Scope{Read: read, Create: create, Update: update, Delete: del}
}

var (
	everything = ops(All, All, All, All)
	readOnly   = ops(All, None, None, None)
	nothing    = ops(None, None, None, None)
)

// roles is the table, the reference's: the owner may do everything; an
// admin everything but change or delete the account itself; an auditor
// read everything; a network admin manage the network (networks, routes,
// DNS, groups, policies) and read the rest but change no user, setup
// key, peer or setting; a user (and a billing admin, whose billing pages
// this server does not have) is granted no module, as in the reference,
// whose handlers still let it read the peers it added and itself: Own
// read on peers and users. It may not change or delete its peers, read
// groups or manage personal access tokens (a token it already holds, from
// before a demotion, still authenticates it).
var roles = map[account.Role]grants{
	account.RoleOwner:   {otherwise: everything},
	account.RoleAdmin:   {otherwise: everything, modules: map[Module]map[Operation]Scope{Accounts: readOnly}},
	account.RoleAuditor: {otherwise: readOnly},
	account.RoleNetworkAdmin: {otherwise: nothing, modules: map[Module]map[Operation]Scope{
		Networks: everything, Groups: everything, DNS: everything, Nameservers: everything, Policies: everything, Routes: everything,
		Pats: everything, Settings: readOnly, Accounts: readOnly, Events: readOnly, Users: readOnly, SetupKeys: readOnly, Peers: readOnly,
		IdentityProviders: readOnly,
	}},
	account.RoleUser:         regular,
	account.RoleBillingAdmin: regular,
}

var regular = grants{otherwise: nothing, modules: map[Module]map[Operation]Scope{
	Peers: ops(Own, None, None, None), Users: ops(Own, None, None, None),
}}

// Can says how far a user's role lets it perform op on module. A service
// user reads every module whatever its role, as the reference's do.
func Can(u account.User, m Module, op Operation) Scope {
	s := RoleCan(u.Role, m, op)
	if u.ServiceUser && op == Read {
		return All
	}
	return s
}

// RoleCan says how far a role lets its holder perform op on module (None
// for an unknown role).
func RoleCan(r account.Role, m Module, op Operation) Scope {
	g, ok := roles[r]
	if !ok {
		return None
	}
	if t, ok := g.modules[m]; ok {
		return t[op]
	}
	return g.otherwise[op]
}

// Restricted reports whether the role is one the account's
// regular_users_view_blocked setting restricts (user and billing admin).
func Restricted(r account.Role) bool { return r == account.RoleUser || r == account.RoleBillingAdmin }
