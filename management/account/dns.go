package account

import "net/netip"

// NameserverGroupID identifies a nameserver group.
type NameserverGroupID string

// Nameserver is one upstream DNS server of a nameserver group.
type Nameserver struct {
	IP     netip.Addr `json:"ip"`
	NSType string     `json:"ns_type"` // "udp" (the only type NetBird's API has)
	Port   int        `json:"port"`
}

// NameserverGroup sends the questions for its match Domains (split DNS),
// or every question when Primary, to its Nameservers, for the peers of its
// distribution Groups.
type NameserverGroup struct {
	ID                   NameserverGroupID `json:"id"`
	AccountID            ID                `json:"account_id"`
	Name                 string            `json:"name"` // 1..40
	Description          string            `json:"description"`
	Nameservers          []Nameserver      `json:"nameservers"` // 1..3
	Enabled              bool              `json:"enabled"`
	Groups               []GroupID         `json:"groups"`
	Primary              bool              `json:"primary"`                // only with no Domains
	Domains              []string          `json:"domains"`                // punycode, no final dot
	SearchDomainsEnabled bool              `json:"search_domains_enabled"` // only with Domains
}

// DNSSettings are the account's DNS settings: the peers of
// DisabledManagementGroups get no DNS configuration.
type DNSSettings struct {
	DisabledManagementGroups []GroupID `json:"disabled_management_groups"`
}

// ZoneID identifies a custom DNS zone.
type ZoneID string

// Zone is a custom DNS zone peers of its distribution groups resolve.
type Zone struct {
	ID                 ZoneID    `json:"id"`
	AccountID          ID        `json:"account_id"`
	Name               string    `json:"name"`   // display name
	Domain             string    `json:"domain"` // punycode, no final dot
	EnableSearchDomain bool      `json:"enable_search_domain"`
	DistributionGroups []GroupID `json:"distribution_groups"`
	Enabled            bool      `json:"enabled"`
	Records            []Record  `json:"records"`
}

// RecordID identifies a record of a zone.
type RecordID string

// Record types a zone may hold.
const (
	RecordA     = "A"
	RecordAAAA  = "AAAA"
	RecordCNAME = "CNAME"
)

// Record is one resource record of a zone.
type Record struct {
	ID      RecordID `json:"id"`
	ZoneID  ZoneID   `json:"zone_id"`
	Name    string   `json:"name"` // FQDN (punycode, no final dot): the zone's domain or below it
	Type    string   `json:"type"` // RecordA, RecordAAAA or RecordCNAME
	Content string   `json:"content"`
	TTL     int      `json:"ttl"` // seconds
}
