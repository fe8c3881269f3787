package account

import "net/netip"

// RouteID identifies a route (the API's classic "routes" resource).
type RouteID string

// Route makes a network, or what some domains resolve to, reachable through
// a routing peer (Peer) or through any peer of some groups (PeerGroups).
// The peers of the distribution Groups receive it. Routes with the same
// NetID and destination form one highly available route: a client uses one
// of their routing peers at a time.
type Route struct {
	ID          RouteID `json:"id"`
	AccountID   ID      `json:"account_id"`
	NetID       string  `json:"network_id"` // display name, 1..40 characters
	Description string  `json:"description"`
	Enabled     bool    `json:"enabled"`
	// Exactly one of Peer and PeerGroups is set.
	Peer       PeerID    `json:"peer,omitempty"`
	PeerGroups []GroupID `json:"peer_groups,omitempty"`
	// Exactly one of Network (valid) and Domains (punycode, wildcards as
	// *.example.com) is set. 0.0.0.0/0 and ::/0 make an exit node.
	Network    netip.Prefix `json:"network"`
	Domains    []string     `json:"domains,omitempty"`
	KeepRoute  bool         `json:"keep_route"`
	Metric     int          `json:"metric"` // 1..9999, lower wins
	Masquerade bool         `json:"masquerade"`
	// Groups are the distribution groups: their peers get the route.
	Groups []GroupID `json:"groups"`
	// AccessControlGroups, when set, limit who may use the route to what
	// policies from those groups allow (NetBird's route ACLs); empty means
	// every peer that gets the route may reach the whole network.
	AccessControlGroups []GroupID `json:"access_control_groups,omitempty"`
	// SkipAutoApply: exit node routes only; clients do not select it by
	// themselves.
	SkipAutoApply bool `json:"skip_auto_apply,omitempty"`
}

// IsExitNode reports whether the route is a default route.
func (r Route) IsExitNode() bool { return r.Network.IsValid() && r.Network.Bits() == 0 }

// NetworkID identifies a network (the API's newer "networks" resource).
type NetworkID string

// Network is a named set of resources reached through its routers.
type Network struct {
	ID          NetworkID `json:"id"`
	AccountID   ID        `json:"account_id"`
	Name        string    `json:"name"`
	Description string    `json:"description"`
}

// NetworkResourceID identifies a resource of a network.
type NetworkResourceID string

// Resource types, derived from the address.
const (
	ResourceHost   = "host"   // one address (a /32 or /128)
	ResourceSubnet = "subnet" // a prefix
	ResourceDomain = "domain" // a name or *.name
)

// NetworkResource is a host, subnet or domain inside a network. It is
// placed in groups; policies reach it by naming one of those groups as a
// destination, or the resource itself (Rule.DestinationResource).
type NetworkResource struct {
	ID          NetworkResourceID `json:"id"`
	NetworkID   NetworkID         `json:"network_id"`
	AccountID   ID                `json:"account_id"`
	Name        string            `json:"name"`
	Description string            `json:"description"`
	Type        string            `json:"type"`    // ResourceHost, ResourceSubnet or ResourceDomain
	Address     string            `json:"address"` // as the admin wrote it
	Prefix      netip.Prefix      `json:"prefix"`  // host and subnet
	Domain      string            `json:"domain"`  // domain (punycode)
	Enabled     bool              `json:"enabled"`
	Groups      []GroupID         `json:"groups"`
}

// NetworkRouterID identifies a router of a network.
type NetworkRouterID string

// NetworkRouter is a peer, or the peers of groups, that route traffic to a
// network's resources.
type NetworkRouter struct {
	ID         NetworkRouterID `json:"id"`
	NetworkID  NetworkID       `json:"network_id"`
	AccountID  ID              `json:"account_id"`
	Peer       PeerID          `json:"peer,omitempty"` // exactly one of Peer and PeerGroups
	PeerGroups []GroupID       `json:"peer_groups,omitempty"`
	Metric     int             `json:"metric"` // 1..9999, lower wins
	Masquerade bool            `json:"masquerade"`
	Enabled    bool            `json:"enabled"`
}
