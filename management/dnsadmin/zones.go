package dnsadmin

import (
	"context"
	"fmt"
	"strconv"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// PutZone creates (z.ID empty) or replaces a zone's own fields after
// validating them against the account; its records stay as they are. A
// zone's domain cannot change (its records are names under it), as in
// NetBird. It returns the zone as stored, with its records.
func (s *Service) PutZone(ctx context.Context, acc account.ID, z account.Zone, initiator string) (account.Zone, error) {
	activity := "dns.zone.update"
	if z.ID == "" {
		z.ID, activity = account.ZoneID(s.newID()), "dns.zone.create"
	}
	z.AccountID = acc
	z.Records = []account.Record{}
	err := s.change(ctx, acc, initiator, func(at *store.AccountTx) ([]event, error) {
		if activity == "dns.zone.update" {
			old, err := at.Zone(ctx, z.ID)
			if err != nil {
				return nil, err
			}
			if d, err := domain("domain", z.Domain, false); err == nil && d != old.Domain {
				return nil, invalid("domain: a zone's domain cannot be changed (from %s to %s); create a new zone", old.Domain, d)
			}
			z.Records = old.Records
		}
		rf, err := loadRefs(ctx, at)
		if err != nil {
			return nil, err
		}
		others, err := at.Zones(ctx)
		if err != nil {
			return nil, err
		}
		if activity == "dns.zone.create" {
			if err := full("zones", len(others), MaxZones); err != nil {
				return nil, err
			}
		}
		if err := rf.checkZone(&z, others); err != nil {
			return nil, err
		}
		if err := at.PutZone(ctx, z); err != nil {
			return nil, err
		}
		return []event{{activity, string(z.ID), zoneMeta(z)}}, nil
	})
	return z, err
}

// DeleteZone removes a zone with its records.
func (s *Service) DeleteZone(ctx context.Context, acc account.ID, id account.ZoneID, initiator string) error {
	return s.change(ctx, acc, initiator, func(at *store.AccountTx) ([]event, error) {
		z, err := at.Zone(ctx, id)
		if err != nil {
			return nil, err
		}
		if err := at.DeleteZone(ctx, id); err != nil {
			return nil, err
		}
		return []event{{"dns.zone.delete", string(id), zoneMeta(z)}}, nil
	})
}

// PutRecord creates (r.ID empty) or replaces a record of zone after
// validating it against the zone's other records. It returns the record
// as stored.
func (s *Service) PutRecord(ctx context.Context, acc account.ID, zone account.ZoneID, r account.Record, initiator string) (account.Record, error) {
	activity := "dns.zone.record.update"
	if r.ID == "" {
		r.ID, activity = account.RecordID(s.newID()), "dns.zone.record.create"
	}
	r.ZoneID = zone
	err := s.change(ctx, acc, initiator, func(at *store.AccountTx) ([]event, error) {
		z, err := at.Zone(ctx, zone)
		if err != nil {
			return nil, err
		}
		if activity == "dns.zone.record.update" {
			if _, err := at.Record(ctx, zone, r.ID); err != nil {
				return nil, err
			}
		} else if err := full(fmt.Sprintf("records in zone %s", z.Domain), len(z.Records), MaxRecordsPerZone); err != nil {
			return nil, err
		}
		if err := checkRecord(z, &r); err != nil {
			return nil, err
		}
		if err := at.PutRecord(ctx, r); err != nil {
			return nil, err
		}
		return []event{{activity, string(r.ID), recordMeta(r, z)}}, nil
	})
	return r, err
}

// DeleteRecord removes a record of a zone.
func (s *Service) DeleteRecord(ctx context.Context, acc account.ID, zone account.ZoneID, id account.RecordID, initiator string) error {
	return s.change(ctx, acc, initiator, func(at *store.AccountTx) ([]event, error) {
		z, err := at.Zone(ctx, zone)
		if err != nil {
			return nil, err
		}
		r, err := at.Record(ctx, zone, id)
		if err != nil {
			return nil, err
		}
		if err := at.DeleteRecord(ctx, zone, id); err != nil {
			return nil, err
		}
		return []event{{"dns.zone.record.delete", string(id), recordMeta(r, z)}}, nil
	})
}

// zoneMeta and recordMeta are what the activity log shows, as NetBird's
// zone and record events carry it.
func zoneMeta(z account.Zone) map[string]string {
	return map[string]string{"name": z.Name, "domain": z.Domain}
}

func recordMeta(r account.Record, z account.Zone) map[string]string {
	return map[string]string{"name": r.Name, "type": r.Type, "content": r.Content, "ttl": strconv.Itoa(r.TTL), "zone_id": string(z.ID), "zone_name": z.Name}
}
