// Package account defines the management domain values: accounts, peers and
// setup keys, with typed identifiers and netip addresses. It holds no
// behaviour beyond small accessors; persistence lives in package store and
// rules in the packages that own them (setupkey, ipam, dnsname, peers).
package account

import (
	"net/netip"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
)

// ID identifies an account.
type ID string

// PeerID identifies a peer inside management (not its WireGuard key).
type PeerID string

// SetupKeyID identifies a setup key record (never the secret key itself).
type SetupKeyID string

// DefaultDomain is the DNS domain peers get unless the account sets another.
const DefaultDomain = "netbird.selfhosted"

// Account is a tenant: its peers share an overlay network and DNS domain.
type Account struct {
	ID      ID           `json:"id"`
	Domain  string       `json:"domain"`
	Network netip.Prefix `json:"network"` // overlay network, a /16 inside 100.64.0.0/10
	// NetworkV6 is the account's IPv6 overlay, a random ULA /64 (fd00::/8).
	NetworkV6 netip.Prefix `json:"network_v6"`
	Serial    uint64       `json:"serial"` // network serial, bumped by every change that affects maps
	CreatedAt time.Time    `json:"created_at"`
	Settings  Settings     `json:"settings"`
}

// Meta is what a peer reports about its system.
type Meta struct {
	Hostname       string   `json:"hostname"`
	GoOS           string   `json:"goos,omitempty"`
	Kernel         string   `json:"kernel,omitempty"`
	KernelVersion  string   `json:"kernel_version,omitempty"`
	Core           string   `json:"core,omitempty"`
	Platform       string   `json:"platform,omitempty"`
	OS             string   `json:"os,omitempty"`
	OSVersion      string   `json:"os_version,omitempty"`
	NetbirdVersion string   `json:"netbird_version,omitempty"`
	UIVersion      string   `json:"ui_version,omitempty"`
	SerialNumber   string   `json:"serial_number,omitempty"`
	ProductName    string   `json:"product_name,omitempty"`
	Manufacturer   string   `json:"manufacturer,omitempty"`
	Addresses      []string `json:"addresses,omitempty"`
	// Files are the peer's answers to the files posture checks ask about.
	Files []FileState `json:"files,omitempty"`
	// ConnectionIP is the public address the peer reached management from.
	ConnectionIP string `json:"connection_ip,omitempty"`
	// Flags are the peer's local settings as its agent reports them.
	Flags LocalFlags `json:"flags,omitzero"`
	// IPv6Overlay: the agent reported capability IPv6Overlay (2), so it
	// can take an address in the account's IPv6 overlay.
	IPv6Overlay bool `json:"ipv6_overlay,omitempty"`
}

// LocalFlags are settings a peer's owner chose on the peer itself
// (netbird up --disable-client-routes and the like): management shows
// them and does not enforce them.
type LocalFlags struct {
	RosenpassEnabled      bool `json:"rosenpass_enabled,omitempty"`
	RosenpassPermissive   bool `json:"rosenpass_permissive,omitempty"`
	ServerSSHAllowed      bool `json:"server_ssh_allowed,omitempty"`
	DisableClientRoutes   bool `json:"disable_client_routes,omitempty"`
	DisableServerRoutes   bool `json:"disable_server_routes,omitempty"`
	DisableDNS            bool `json:"disable_dns,omitempty"`
	DisableFirewall       bool `json:"disable_firewall,omitempty"`
	BlockLANAccess        bool `json:"block_lan_access,omitempty"`
	BlockInbound          bool `json:"block_inbound,omitempty"`
	LazyConnectionEnabled bool `json:"lazy_connection_enabled,omitempty"`
	// DisableIPv6: the owner turned the IPv6 overlay off on the peer
	// (netbird up --disable-ipv6); management then gives it no v6 address.
	DisableIPv6 bool `json:"disable_ipv6,omitempty"`
}

// Peer is one registered machine.
type Peer struct {
	ID        PeerID     `json:"id"`
	AccountID ID         `json:"account_id"`
	Key       key.Public `json:"key"`
	IP        netip.Addr `json:"ip"`
	// IPv6 is the peer's address in the account's NetworkV6; the zero
	// Addr when the peer has none (not capable, disabled, or in no group
	// of Settings.IPv6EnabledGroups).
	IPv6       netip.Addr `json:"ipv6,omitzero"`
	Name       string     `json:"name"`      // display name, from the hostname
	DNSLabel   string     `json:"dns_label"` // unique in the account; FQDN is DNSLabel.Domain
	Meta       Meta       `json:"meta"`
	SSHPubKey  string     `json:"ssh_pub_key"`
	SetupKeyID SetupKeyID `json:"setup_key_id"`
	Ephemeral  bool       `json:"ephemeral"`
	CreatedAt  time.Time  `json:"created_at"`
	LastLogin  time.Time  `json:"last_login"`
	LastSeen   time.Time  `json:"last_seen"`
	Connected  bool       `json:"connected"`
	// UserID is the user who added the peer through SSO (empty for setup keys).
	UserID UserID `json:"user_id,omitempty"`
	// LoginExpirationEnabled: the peer must log in again when the
	// account's login expiration passes (peers added by users).
	LoginExpirationEnabled bool `json:"login_expiration_enabled,omitempty"`
	// ApprovalRequired: the peer registered while the account's peer
	// approval was on and no admin has approved it yet. A pending peer gets
	// no peers in its network map and appears in no other peer's map.
	ApprovalRequired bool `json:"approval_required,omitempty"`
	// Temporary: an admin created the peer for the dashboard's in-browser
	// client (POST /api/peers/{id}/temporary-access). It belongs to no
	// group, not even All, reaches only what the policies naming it allow,
	// and is removed with those policies when its Sync stream ends.
	Temporary bool `json:"temporary,omitempty"`
	// SSHEnabled is the admin's switch for the peer's SSH server (REST
	// ssh_enabled). The agent serves SSH only when this and its own
	// --allow-server-ssh (Flags.ServerSSHAllowed) are both on.
	SSHEnabled bool `json:"ssh_enabled,omitempty"`
}

// SupportsIPv6 reports whether the peer's agent can use the IPv6 overlay:
// it reported the capability and its owner did not turn IPv6 off.
func (p Peer) SupportsIPv6() bool { return p.Meta.IPv6Overlay && !p.Meta.Flags.DisableIPv6 }

// FQDN returns the peer's fully qualified name in domain.
func (p Peer) FQDN(domain string) string { return p.DNSLabel + "." + domain }

// SetupKey lets machines register without a browser. Only the hash of the
// secret is kept; Prefix is the first characters for display.
type SetupKey struct {
	ID         SetupKeyID `json:"id"`
	AccountID  ID         `json:"account_id"`
	Name       string     `json:"name"`
	Hash       string     `json:"key_hash"`
	Prefix     string     `json:"key_prefix"`
	Reusable   bool       `json:"reusable"`
	UsageLimit int        `json:"usage_limit"` // 0 means unlimited (reusable keys only)
	UsedTimes  int        `json:"used_times"`
	ExpiresAt  time.Time  `json:"expires_at"` // zero means never
	Revoked    bool       `json:"revoked"`
	AutoGroups []string   `json:"auto_groups"`
	Ephemeral  bool       `json:"ephemeral"`
	CreatedAt  time.Time  `json:"created_at"`
	LastUsed   time.Time  `json:"last_used"`
}

// Event is one entry of an account's activity log: who did what to what.
type Event struct {
	ID        int64             `json:"id"`
	AccountID ID                `json:"account_id"`
	At        time.Time         `json:"at"`
	Activity  string            `json:"activity"`  // e.g. "peer.setupkey.add", "setupkey.revoke"
	Initiator string            `json:"initiator"` // peer, user or "admin-cli"
	Target    string            `json:"target"`    // the affected object's ID
	Meta      map[string]string `json:"meta"`      // small details (names, addresses)
}

// GroupID identifies a group.
type GroupID string

// Group is a set of peers that policies name. The All group, which every
// account has, contains every peer implicitly.
type Group struct {
	ID        GroupID  `json:"id"`
	AccountID ID       `json:"account_id"`
	Name      string   `json:"name"`
	All       bool     `json:"all"`   // the built-in group of every peer
	Peers     []PeerID `json:"peers"` // explicit members (unused for All)
}

// PolicyID identifies a policy.
type PolicyID string

// Protocols a rule can name.
const (
	ProtoAll  = "all"
	ProtoTCP  = "tcp"
	ProtoUDP  = "udp"
	ProtoICMP = "icmp"
)

// Actions of a rule.
const (
	ActionAccept = "accept"
	ActionDrop   = "drop"
)

// PortRange is an inclusive range of ports.
type PortRange struct {
	Start uint16 `json:"start"`
	End   uint16 `json:"end"`
}

// Rule lets the sources open connections to the destinations (and the
// other way round when bidirectional), for a protocol and ports.
type Rule struct {
	ID            string      `json:"id"`
	Name          string      `json:"name"`
	Enabled       bool        `json:"enabled"`
	Action        string      `json:"action"`   // accept or drop
	Protocol      string      `json:"protocol"` // all, tcp, udp or icmp
	Bidirectional bool        `json:"bidirectional"`
	Ports         []uint16    `json:"ports,omitempty"`       // destination ports (tcp/udp); none means all
	PortRanges    []PortRange `json:"port_ranges,omitempty"` // destination port ranges
	Sources       []GroupID   `json:"sources"`
	Destinations  []GroupID   `json:"destinations"`
	// SourcePeer / DestinationPeer name a single peer instead of groups
	// (the API's sourceResource / destinationResource of type "peer").
	SourcePeer      PeerID `json:"source_peer,omitempty"`
	DestinationPeer PeerID `json:"destination_peer,omitempty"`
	// DestinationResource names a network resource (the API's
	// destinationResource of type host, subnet or domain) instead of
	// destination groups.
	DestinationResource NetworkResourceID `json:"destination_resource,omitempty"`
}

// Policy is a named, switchable set of rules.
type Policy struct {
	ID          PolicyID `json:"id"`
	AccountID   ID       `json:"account_id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Enabled     bool     `json:"enabled"`
	Rules       []Rule   `json:"rules"`
	// PostureChecks the source peers must meet (IDs).
	PostureChecks []string `json:"source_posture_checks,omitempty"`
}
