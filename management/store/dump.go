package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/ipam"
)

// DumpFormat versions the export format; Import refuses formats it does not
// know.
const DumpFormat = 1

// Dump is a whole account as exported: everything needed to recreate it in
// another store (of either engine) with the same IDs, addresses, keys and
// setup-key hashes, so that its peers keep working against the new store.
type Dump struct {
	Format    int                `json:"format"`
	Account   account.Account    `json:"account"`
	Peers     []account.Peer     `json:"peers"`
	SetupKeys []account.SetupKey `json:"setup_keys"`
	Events    []account.Event    `json:"events"`
	Groups    []account.Group    `json:"groups"`
	Policies  []account.Policy   `json:"policies"`
	Users     []account.User     `json:"users,omitempty"`
	Tokens    []account.Token    `json:"tokens,omitempty"`
	Invites   []account.Invite   `json:"invites,omitempty"`
	// Credentials are the built-in identity provider's local logins
	// (password hashes) of the dump's users: without them a move to
	// another store would lock every local user out.
	Credentials []account.Credential `json:"credentials,omitempty"`
	// TOTPFactors are those local logins' second factors; the identity
	// providers the account added to the login page (client secrets
	// sealed with the store key: import with the same key) and which
	// user each upstream subject logs in as.
	TOTPFactors       []TOTPFactor       `json:"totp_factors,omitempty"`
	IdentityProviders []IdentityProvider `json:"identity_providers,omitempty"`
	IdPLinks          []IdPLinkEntry     `json:"idp_links,omitempty"`
	// PostureChecks come before the policies that name them on import.
	PostureChecks []account.PostureCheck `json:"posture_checks,omitempty"`
	// Routes and networks; a network comes before its resources and
	// routers on import.
	Routes           []account.Route           `json:"routes,omitempty"`
	Networks         []account.Network         `json:"networks,omitempty"`
	NetworkResources []account.NetworkResource `json:"network_resources,omitempty"`
	NetworkRouters   []account.NetworkRouter   `json:"network_routers,omitempty"`
	// DNS: nameserver groups, settings (nil when never saved) and zones
	// with their records.
	NameserverGroups []account.NameserverGroup `json:"nameserver_groups,omitempty"`
	DNSSettings      *account.DNSSettings      `json:"dns_settings,omitempty"`
	Zones            []account.Zone            `json:"dns_zones,omitempty"`
}

// Export reads the whole account.
func (a *AccountTx) Export(ctx context.Context) (Dump, error) {
	d := Dump{Format: DumpFormat}
	var err error
	if d.Account, err = a.Account(ctx); err != nil {
		return d, err
	}
	if d.Peers, err = a.Peers(ctx); err != nil {
		return d, err
	}
	if d.SetupKeys, err = a.SetupKeys(ctx); err != nil {
		return d, err
	}
	if d.Events, err = a.Events(ctx, 0); err != nil {
		return d, err
	}
	if d.Groups, err = a.Groups(ctx); err != nil {
		return d, err
	}
	if d.Policies, err = a.Policies(ctx); err != nil {
		return d, err
	}
	if d.Users, err = a.Users(ctx); err != nil {
		return d, err
	}
	if d.Tokens, err = a.AllTokens(ctx); err != nil {
		return d, err
	}
	if d.Invites, err = a.Invites(ctx); err != nil {
		return d, err
	}
	for _, u := range d.Users {
		c, err := a.tx.Credential(ctx, u.ID)
		if errors.Is(err, ErrNotFound) {
			continue // a user of an external provider
		}
		if err != nil {
			return d, err
		}
		d.Credentials = append(d.Credentials, c)
		f, err := a.tx.TOTPFactor(ctx, string(u.ID))
		if errors.Is(err, ErrNotFound) {
			continue
		}
		if err != nil {
			return d, err
		}
		d.TOTPFactors = append(d.TOTPFactors, f)
	}
	if d.IdentityProviders, err = a.IdentityProviders(ctx); err != nil {
		return d, err
	}
	if d.IdPLinks, err = a.IdPLinks(ctx); err != nil {
		return d, err
	}
	if d.PostureChecks, err = a.PostureChecks(ctx); err != nil {
		return d, err
	}
	if d.Routes, err = a.Routes(ctx); err != nil {
		return d, err
	}
	if d.Networks, err = a.Networks(ctx); err != nil {
		return d, err
	}
	if d.NetworkResources, err = a.NetworkResources(ctx); err != nil {
		return d, err
	}
	if d.NetworkRouters, err = a.NetworkRouters(ctx); err != nil {
		return d, err
	}
	if err := a.exportDNS(ctx, &d); err != nil {
		return d, err
	}
	if d.Peers == nil {
		d.Peers = []account.Peer{}
	}
	if d.SetupKeys == nil {
		d.SetupKeys = []account.SetupKey{}
	}
	if d.Events == nil {
		d.Events = []account.Event{}
	}
	return d, nil
}

// Import recreates an exported account. An account with the same ID, or a
// peer key, address or setup key already in use, gives ErrConflict and
// changes nothing (when run inside Store.Tx).
func (tx *Tx) Import(ctx context.Context, d Dump) error {
	if d.Format != DumpFormat {
		return fmt.Errorf("import: dump format %d, this version reads %d", d.Format, DumpFormat)
	}
	if d.Account.ID == "" || !d.Account.Network.IsValid() {
		return fmt.Errorf("import: the dump has no account ID or network")
	}
	if !d.Account.NetworkV6.IsValid() {
		// A dump from before the IPv6 overlay: the account gets its
		// random /64 as migration 0020 gives one to existing accounts.
		n, err := ipam.RandomNetworkV6()
		if err != nil {
			return fmt.Errorf("import account %s: %w", d.Account.ID, err)
		}
		d.Account.NetworkV6 = n
	}
	if err := tx.InsertAccount(ctx, d.Account); err != nil {
		return fmt.Errorf("import account %s: %w", d.Account.ID, err)
	}
	a := tx.In(d.Account.ID)
	for _, u := range d.Users {
		if err := a.InsertUser(ctx, u); err != nil {
			return fmt.Errorf("import user %s: %w", u.ID, err)
		}
	}
	for _, t := range d.Tokens {
		if err := a.InsertToken(ctx, t); err != nil {
			return fmt.Errorf("import token %s: %w", t.ID, err)
		}
	}
	for _, v := range d.Invites {
		if err := a.PutInvite(ctx, v); err != nil {
			return fmt.Errorf("import invite %s: %w", v.ID, err)
		}
	}
	users := make(map[account.UserID]bool, len(d.Users))
	for _, u := range d.Users {
		users[u.ID] = true
	}
	for _, c := range d.Credentials {
		// Local logins are not account rows: only those of the dump's
		// own users may come in with it.
		if !users[c.Subject] {
			return fmt.Errorf("import credential %s: not a user of account %s", c.Subject, d.Account.ID)
		}
		if err := tx.InsertCredential(ctx, c); err != nil {
			return fmt.Errorf("import credential %s: %w", c.Subject, err)
		}
	}
	if err := importIdentity(ctx, a, d, users); err != nil {
		return err
	}
	for _, k := range d.SetupKeys {
		if err := a.InsertSetupKey(ctx, k); err != nil {
			return fmt.Errorf("import setup key %s: %w", k.ID, err)
		}
	}
	for _, p := range d.Peers {
		if !d.Account.Network.Contains(p.IP) {
			return fmt.Errorf("import peer %s: address %s outside the account network %s", p.ID, p.IP, d.Account.Network)
		}
		if p.IPv6.IsValid() && !d.Account.NetworkV6.Contains(p.IPv6) {
			return fmt.Errorf("import peer %s: ipv6 %s outside the account IPv6 network %s", p.ID, p.IPv6, d.Account.NetworkV6)
		}
		if err := a.InsertPeer(ctx, p); err != nil {
			return fmt.Errorf("import peer %s: %w", p.ID, err)
		}
	}
	if len(d.Groups) == 0 && len(d.Policies) == 0 {
		// A dump from before access control: the account gets the defaults.
		all, pol := DefaultAccess(d.Account.ID)
		d.Groups, d.Policies = []account.Group{all}, []account.Policy{pol}
	}
	for _, g := range d.Groups {
		if err := a.PutGroup(ctx, g); err != nil {
			return fmt.Errorf("import group %s: %w", g.ID, err)
		}
	}
	for _, c := range d.PostureChecks {
		if err := a.PutPostureCheck(ctx, c); err != nil {
			return fmt.Errorf("import posture check %s: %w", c.ID, err)
		}
	}
	for _, p := range d.Policies {
		if err := a.PutPolicy(ctx, p); err != nil {
			return fmt.Errorf("import policy %s: %w", p.ID, err)
		}
	}
	if err := importRouting(ctx, a, d); err != nil {
		return err
	}
	if err := importDNS(ctx, a, d); err != nil {
		return err
	}
	// Events were exported newest first; keep their numbers.
	for _, e := range d.Events {
		if err := a.owns("event", e.AccountID); err != nil {
			return err
		}
		meta, err := json.Marshal(e.Meta)
		if err != nil {
			return err
		}
		_, err = tx.q.exec(ctx, `INSERT INTO events (account_id, seq, at, activity, initiator, target, meta) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			string(a.id), e.ID, nanos(e.At), e.Activity, e.Initiator, e.Target, string(meta))
		if err != nil {
			return fmt.Errorf("import event %d: %w", e.ID, mapErr(err))
		}
	}
	return nil
}

// importIdentity writes the dump's TOTP factors (each with a local login
// of the dump), identity providers and their links (each to a provider
// and a user of the dump).
func importIdentity(ctx context.Context, a *AccountTx, d Dump, users map[account.UserID]bool) error {
	logins := make(map[string]bool, len(d.Credentials))
	for _, c := range d.Credentials {
		logins[string(c.Subject)] = true
	}
	for _, f := range d.TOTPFactors {
		if !logins[f.Subject] {
			return fmt.Errorf("import totp factor %s: no local login of the dump", f.Subject)
		}
		if err := a.tx.PutTOTPFactor(ctx, f); err != nil {
			return fmt.Errorf("import totp factor %s: %w", f.Subject, err)
		}
	}
	providers := make(map[string]bool, len(d.IdentityProviders))
	for _, p := range d.IdentityProviders {
		if p.AccountID != d.Account.ID {
			return fmt.Errorf("import identity provider %s: account %q, not %s", p.ID, p.AccountID, d.Account.ID)
		}
		if err := a.InsertIdentityProvider(ctx, p); err != nil {
			return fmt.Errorf("import identity provider %s: %w", p.ID, err)
		}
		providers[p.ID] = true
	}
	for _, l := range d.IdPLinks {
		if !providers[l.ProviderID] || !users[l.UserID] {
			return fmt.Errorf("import identity provider link %s/%s: provider or user %s not in the dump", l.ProviderID, l.UpstreamSubject, l.UserID)
		}
		if err := a.tx.InsertIdPLink(ctx, l.ProviderID, l.UpstreamSubject, l.UserID); err != nil {
			return fmt.Errorf("import identity provider link %s/%s: %w", l.ProviderID, l.UpstreamSubject, err)
		}
	}
	return nil
}

// importRouting writes the dump's routes and networks, each network before
// its resources and routers.
func importRouting(ctx context.Context, a *AccountTx, d Dump) error {
	for _, r := range d.Routes {
		if err := a.PutRoute(ctx, r); err != nil {
			return fmt.Errorf("import route %s: %w", r.ID, err)
		}
	}
	for _, n := range d.Networks {
		if err := a.PutNetwork(ctx, n); err != nil {
			return fmt.Errorf("import network %s: %w", n.ID, err)
		}
	}
	for _, r := range d.NetworkResources {
		if err := a.PutNetworkResource(ctx, r); err != nil {
			return fmt.Errorf("import network resource %s: %w", r.ID, err)
		}
	}
	for _, r := range d.NetworkRouters {
		if err := a.PutNetworkRouter(ctx, r); err != nil {
			return fmt.Errorf("import network router %s: %w", r.ID, err)
		}
	}
	return nil
}

// exportDNS reads the account's nameserver groups, DNS settings (only when
// saved, so a dump of an account without any stays as it was) and zones.
func (a *AccountTx) exportDNS(ctx context.Context, d *Dump) error {
	var err error
	if d.NameserverGroups, err = a.NameserverGroups(ctx); err != nil {
		return err
	}
	var n int
	if err := a.q().queryRow(ctx, `SELECT COUNT(*) FROM dns_settings WHERE account_id = ?`, string(a.id)).Scan(&n); err != nil {
		return mapErr(err)
	}
	if n > 0 {
		s, err := a.DNSSettings(ctx)
		if err != nil {
			return err
		}
		d.DNSSettings = &s
	}
	d.Zones, err = a.Zones(ctx)
	return err
}

// importDNS writes the dump's nameserver groups, DNS settings and zones,
// each zone before its records.
func importDNS(ctx context.Context, a *AccountTx, d Dump) error {
	for _, g := range d.NameserverGroups {
		if err := a.PutNameserverGroup(ctx, g); err != nil {
			return fmt.Errorf("import nameserver group %s: %w", g.ID, err)
		}
	}
	if d.DNSSettings != nil {
		if err := a.PutDNSSettings(ctx, *d.DNSSettings); err != nil {
			return fmt.Errorf("import dns settings: %w", err)
		}
	}
	for _, z := range d.Zones {
		if err := a.PutZone(ctx, z); err != nil {
			return fmt.Errorf("import zone %s: %w", z.ID, err)
		}
		for _, r := range z.Records {
			if r.ZoneID != z.ID {
				return fmt.Errorf("import zone %s: record %s names zone %q", z.ID, r.ID, r.ZoneID)
			}
			if err := a.PutRecord(ctx, r); err != nil {
				return fmt.Errorf("import zone %s record %s: %w", z.ID, r.ID, err)
			}
		}
	}
	return nil
}
