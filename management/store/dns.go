package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/wiremesh/wiremesh/management/account"
)

// This file stores the account's DNS: nameserver groups, DNS settings and
// custom zones with their records. Every write bumps the view revision (as
// route writes do); the serial bump that makes servers push new maps is
// the domain service's, once per change.

// --- nameserver groups ---

const nsGroupCols = `id, account_id, name, description, nameservers, enabled, group_ids, is_primary, domains, search_domains_enabled`

func scanNameserverGroup(sc scanner) (account.NameserverGroup, error) {
	var (
		g                   account.NameserverGroup
		id, acc, ns, gs, ds string
		err                 error
	)
	if err := sc.Scan(&id, &acc, &g.Name, &g.Description, &ns, &g.Enabled, &gs, &g.Primary, &ds, &g.SearchDomainsEnabled); err != nil {
		return g, mapErr(err)
	}
	g.ID, g.AccountID = account.NameserverGroupID(id), account.ID(acc)
	if err := json.Unmarshal([]byte(ns), &g.Nameservers); err != nil {
		return g, fmt.Errorf("nameserver group %s: bad nameservers: %w", id, err)
	}
	if g.Groups, err = parseGroupIDs("nameserver group", id, gs); err != nil {
		return g, err
	}
	if err := json.Unmarshal([]byte(ds), &g.Domains); err != nil {
		return g, fmt.Errorf("nameserver group %s: bad domains: %w", id, err)
	}
	return g, nil
}

// NameserverGroups lists the account's nameserver groups by name, then ID.
func (a *AccountTx) NameserverGroups(ctx context.Context) ([]account.NameserverGroup, error) {
	return queryAll(ctx, a.q(), scanNameserverGroup, `SELECT `+nsGroupCols+` FROM nameserver_groups WHERE account_id = ? ORDER BY name, id`, string(a.id))
}

// NameserverGroup finds one of the account's nameserver groups.
func (a *AccountTx) NameserverGroup(ctx context.Context, id account.NameserverGroupID) (account.NameserverGroup, error) {
	return scanNameserverGroup(a.q().queryRow(ctx, `SELECT `+nsGroupCols+` FROM nameserver_groups WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
}

// PutNameserverGroup inserts or replaces a nameserver group.
func (a *AccountTx) PutNameserverGroup(ctx context.Context, g account.NameserverGroup) error {
	if err := a.owns("nameserver group", g.AccountID); err != nil {
		return err
	}
	nss := g.Nameservers
	if nss == nil {
		nss = []account.Nameserver{}
	}
	ns, err := json.Marshal(nss)
	if err != nil {
		return err
	}
	gs, err := groupIDs(g.Groups)
	if err != nil {
		return err
	}
	ds, err := jsonList(g.Domains)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	vals := []any{g.Name, g.Description, string(ns), g.Enabled, gs, g.Primary, ds, g.SearchDomainsEnabled}
	return a.upsert(ctx,
		`UPDATE nameserver_groups SET name = ?, description = ?, nameservers = ?, enabled = ?, group_ids = ?, is_primary = ?, domains = ?, search_domains_enabled = ? WHERE id = ? AND account_id = ?`,
		append(vals, string(g.ID), string(a.id)),
		`INSERT INTO nameserver_groups (`+nsGroupCols+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		append([]any{string(g.ID), string(a.id)}, vals...))
}

// DeleteNameserverGroup removes a nameserver group.
func (a *AccountTx) DeleteNameserverGroup(ctx context.Context, id account.NameserverGroupID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `DELETE FROM nameserver_groups WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// --- settings ---

// DNSSettings reads the account's DNS settings: the zero value (with an
// empty, non-nil group list) when they were never saved.
func (a *AccountTx) DNSSettings(ctx context.Context) (account.DNSSettings, error) {
	s := account.DNSSettings{DisabledManagementGroups: []account.GroupID{}}
	var gs string
	err := a.q().queryRow(ctx, `SELECT disabled_management_groups FROM dns_settings WHERE account_id = ?`, string(a.id)).Scan(&gs)
	if err = mapErr(err); errors.Is(err, ErrNotFound) {
		return s, nil
	} else if err != nil {
		return s, err
	}
	s.DisabledManagementGroups, err = parseGroupIDs("dns settings of account", string(a.id), gs)
	return s, err
}

// PutDNSSettings saves the account's DNS settings.
func (a *AccountTx) PutDNSSettings(ctx context.Context, s account.DNSSettings) error {
	gs, err := groupIDs(s.DisabledManagementGroups)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	return a.upsert(ctx,
		`UPDATE dns_settings SET disabled_management_groups = ? WHERE account_id = ?`,
		[]any{gs, string(a.id)},
		`INSERT INTO dns_settings (account_id, disabled_management_groups) VALUES (?, ?)`,
		[]any{string(a.id), gs})
}

// --- zones ---

const zoneCols = `id, account_id, name, domain, enable_search_domain, group_ids, enabled`

func scanZone(sc scanner) (account.Zone, error) {
	var (
		z           account.Zone
		id, acc, gs string
		err         error
	)
	if err := sc.Scan(&id, &acc, &z.Name, &z.Domain, &z.EnableSearchDomain, &gs, &z.Enabled); err != nil {
		return z, mapErr(err)
	}
	z.ID, z.AccountID = account.ZoneID(id), account.ID(acc)
	if z.DistributionGroups, err = parseGroupIDs("zone", id, gs); err != nil {
		return z, err
	}
	z.Records = []account.Record{}
	return z, nil
}

// Zones lists the account's zones by domain, each with its records.
func (a *AccountTx) Zones(ctx context.Context) ([]account.Zone, error) {
	zs, err := queryAll(ctx, a.q(), scanZone, `SELECT `+zoneCols+` FROM dns_zones WHERE account_id = ? ORDER BY domain, id`, string(a.id))
	if err != nil || len(zs) == 0 {
		return zs, err
	}
	rs, err := queryAll(ctx, a.q(), scanRecord, `SELECT `+recordCols+` FROM dns_records WHERE account_id = ? ORDER BY name, type, id`, string(a.id))
	if err != nil {
		return nil, err
	}
	at := make(map[account.ZoneID]int, len(zs))
	for i, z := range zs {
		at[z.ID] = i
	}
	for _, r := range rs {
		if i, ok := at[r.ZoneID]; ok {
			zs[i].Records = append(zs[i].Records, r)
		}
	}
	return zs, nil
}

// Zone finds one of the account's zones, with its records.
func (a *AccountTx) Zone(ctx context.Context, id account.ZoneID) (account.Zone, error) {
	z, err := scanZone(a.q().queryRow(ctx, `SELECT `+zoneCols+` FROM dns_zones WHERE id = ? AND account_id = ?`, string(id), string(a.id)))
	if err != nil {
		return z, err
	}
	rs, err := a.ZoneRecords(ctx, id)
	if err != nil {
		return z, err
	}
	if rs != nil {
		z.Records = rs
	}
	return z, nil
}

// PutZone inserts or replaces a zone's own fields; its records are left as
// they are (PutRecord writes those). A domain another zone of the account
// has gives ErrConflict.
func (a *AccountTx) PutZone(ctx context.Context, z account.Zone) error {
	if err := a.owns("zone", z.AccountID); err != nil {
		return err
	}
	gs, err := groupIDs(z.DistributionGroups)
	if err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	vals := []any{z.Name, z.Domain, z.EnableSearchDomain, gs, z.Enabled}
	return a.upsert(ctx,
		`UPDATE dns_zones SET name = ?, domain = ?, enable_search_domain = ?, group_ids = ?, enabled = ? WHERE id = ? AND account_id = ?`,
		append(vals, string(z.ID), string(a.id)),
		`INSERT INTO dns_zones (`+zoneCols+`) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		append([]any{string(z.ID), string(a.id)}, vals...))
}

// DeleteZone removes a zone with its records. The records are deleted
// explicitly too, so that the result does not depend on the engine
// enforcing foreign keys.
func (a *AccountTx) DeleteZone(ctx context.Context, id account.ZoneID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	if _, err := a.q().exec(ctx, `DELETE FROM dns_records WHERE zone_id = ? AND account_id = ?`, string(id), string(a.id)); err != nil {
		return mapErr(err)
	}
	n, err := a.q().exec(ctx, `DELETE FROM dns_zones WHERE id = ? AND account_id = ?`, string(id), string(a.id))
	return affected(n, err)
}

// --- records ---

const recordCols = `id, zone_id, name, type, content, ttl`

func scanRecord(sc scanner) (account.Record, error) {
	var (
		r      account.Record
		id, zn string
	)
	if err := sc.Scan(&id, &zn, &r.Name, &r.Type, &r.Content, &r.TTL); err != nil {
		return r, mapErr(err)
	}
	r.ID, r.ZoneID = account.RecordID(id), account.ZoneID(zn)
	return r, nil
}

// ZoneRecords lists a zone's records by name, type, then ID (none for a
// zone that does not exist).
func (a *AccountTx) ZoneRecords(ctx context.Context, zone account.ZoneID) ([]account.Record, error) {
	return queryAll(ctx, a.q(), scanRecord, `SELECT `+recordCols+` FROM dns_records WHERE zone_id = ? AND account_id = ? ORDER BY name, type, id`, string(zone), string(a.id))
}

// Record finds one record of one of the account's zones.
func (a *AccountTx) Record(ctx context.Context, zone account.ZoneID, id account.RecordID) (account.Record, error) {
	return scanRecord(a.q().queryRow(ctx, `SELECT `+recordCols+` FROM dns_records WHERE id = ? AND zone_id = ? AND account_id = ?`, string(id), string(zone), string(a.id)))
}

// PutRecord inserts or replaces a record of a zone; a zone that does not
// exist in the account is ErrNotFound.
func (a *AccountTx) PutRecord(ctx context.Context, r account.Record) error {
	if _, err := scanZone(a.q().queryRow(ctx, `SELECT `+zoneCols+` FROM dns_zones WHERE id = ? AND account_id = ?`, string(r.ZoneID), string(a.id))); err != nil {
		return err
	}
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	vals := []any{r.Name, r.Type, r.Content, r.TTL}
	return a.upsert(ctx,
		`UPDATE dns_records SET name = ?, type = ?, content = ?, ttl = ? WHERE id = ? AND zone_id = ? AND account_id = ?`,
		append(vals, string(r.ID), string(r.ZoneID), string(a.id)),
		`INSERT INTO dns_records (id, account_id, zone_id, name, type, content, ttl) VALUES (?, ?, ?, ?, ?, ?, ?)`,
		append([]any{string(r.ID), string(a.id), string(r.ZoneID)}, vals...))
}

// DeleteRecord removes a record of a zone.
func (a *AccountTx) DeleteRecord(ctx context.Context, zone account.ZoneID, id account.RecordID) error {
	if err := a.bumpView(ctx); err != nil {
		return err
	}
	n, err := a.q().exec(ctx, `DELETE FROM dns_records WHERE id = ? AND zone_id = ? AND account_id = ?`, string(id), string(zone), string(a.id))
	return affected(n, err)
}
