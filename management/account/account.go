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
	ID        ID
	Domain    string
	Network   netip.Prefix // overlay network, a /16 inside 100.64.0.0/10
	Serial    uint64       // network serial, bumped by every change that affects maps
	CreatedAt time.Time
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
}

// Peer is one registered machine.
type Peer struct {
	ID         PeerID
	AccountID  ID
	Key        key.Public
	IP         netip.Addr
	Name       string // display name, from the hostname
	DNSLabel   string // unique in the account; FQDN is DNSLabel.Domain
	Meta       Meta
	SSHPubKey  string
	SetupKeyID SetupKeyID
	Ephemeral  bool
	CreatedAt  time.Time
	LastLogin  time.Time
	LastSeen   time.Time
	Connected  bool
}

// FQDN returns the peer's fully qualified name in domain.
func (p Peer) FQDN(domain string) string { return p.DNSLabel + "." + domain }

// SetupKey lets machines register without a browser. Only the hash of the
// secret is kept; Prefix is the first characters for display.
type SetupKey struct {
	ID         SetupKeyID
	AccountID  ID
	Name       string
	Hash       string
	Prefix     string
	Reusable   bool
	UsageLimit int // 0 means unlimited (reusable keys only)
	UsedTimes  int
	ExpiresAt  time.Time // zero means never
	Revoked    bool
	AutoGroups []string
	Ephemeral  bool
	CreatedAt  time.Time
	LastUsed   time.Time
}
