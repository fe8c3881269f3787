package httpapi

import (
	"net/http"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/store"
)

// Custom DNS zones and their records (/api/dns/zones), module dns; the
// routes are registered in dns.go.

type zoneRequest struct {
	Name               string   `json:"name"`
	Domain             string   `json:"domain"`
	EnableSearchDomain bool     `json:"enable_search_domain"`
	DistributionGroups []string `json:"distribution_groups"`
	Enabled            *bool    `json:"enabled"` // default true
}

type zoneJSON struct {
	ID                 string       `json:"id"`
	Name               string       `json:"name"`
	Domain             string       `json:"domain"`
	EnableSearchDomain bool         `json:"enable_search_domain"`
	DistributionGroups []string     `json:"distribution_groups"`
	Enabled            bool         `json:"enabled"`
	Records            []recordJSON `json:"records"`
}

type recordRequest struct {
	Name    string `json:"name"`
	Type    string `json:"type"`
	Content string `json:"content"`
	TTL     int    `json:"ttl"`
}

type recordJSON struct {
	ID string `json:"id"`
	recordRequest
}

func toRecord(r account.Record) recordJSON {
	return recordJSON{ID: string(r.ID), recordRequest: recordRequest{Name: r.Name, Type: r.Type, Content: r.Content, TTL: r.TTL}}
}

func toRecords(rs []account.Record) []recordJSON {
	out := make([]recordJSON, 0, len(rs))
	for _, r := range rs {
		out = append(out, toRecord(r))
	}
	return out
}

func toZone(z account.Zone) zoneJSON {
	return zoneJSON{ID: string(z.ID), Name: z.Name, Domain: z.Domain, EnableSearchDomain: z.EnableSearchDomain,
		DistributionGroups: groupStrings(z.DistributionGroups), Enabled: z.Enabled, Records: toRecords(z.Records)}
}

// readZone reads one zone (with its records) of the caller's account.
func (a *API) readZone(r *http.Request, caller account.User) (account.Zone, error) {
	var z account.Zone
	err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		z, err = tx.In(caller.AccountID).Zone(r.Context(), account.ZoneID(r.PathValue("zoneId")))
		return err
	})
	return z, err
}

func (a *API) listZones(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var zs []account.Zone
	if err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		zs, err = tx.In(caller.AccountID).Zones(r.Context())
		return err
	}); err != nil {
		return err
	}
	out := make([]zoneJSON, 0, len(zs))
	for _, z := range zs {
		out = append(out, toZone(z))
	}
	return ok(w, out)
}

func (a *API) getZone(w http.ResponseWriter, r *http.Request, caller account.User) error {
	z, err := a.readZone(r, caller)
	if err != nil {
		return err
	}
	return ok(w, toZone(z))
}

func (a *API) putZone(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.DNS, writeOp(r)); err != nil {
		return err
	}
	s, err := a.dnsService()
	if err != nil {
		return err
	}
	var req zoneRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	z := account.Zone{ID: account.ZoneID(r.PathValue("zoneId")), Name: req.Name, Domain: req.Domain, EnableSearchDomain: req.EnableSearchDomain,
		DistributionGroups: groupIDs(req.DistributionGroups), Enabled: req.Enabled == nil || *req.Enabled}
	if z, err = s.PutZone(r.Context(), caller.AccountID, z, string(caller.ID)); err != nil {
		return err
	}
	return ok(w, toZone(z))
}

func (a *API) deleteZone(w http.ResponseWriter, r *http.Request, caller account.User) error {
	s, err := a.dnsService()
	if err != nil {
		return err
	}
	return adminDelete(w, caller, auth.DNS, func() error {
		return s.DeleteZone(r.Context(), caller.AccountID, account.ZoneID(r.PathValue("zoneId")), string(caller.ID))
	})
}

func (a *API) listRecords(w http.ResponseWriter, r *http.Request, caller account.User) error {
	z, err := a.readZone(r, caller)
	if err != nil {
		return err
	}
	return ok(w, toRecords(z.Records))
}

func (a *API) getRecord(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var rec account.Record
	if err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		rec, err = tx.In(caller.AccountID).Record(r.Context(), account.ZoneID(r.PathValue("zoneId")), account.RecordID(r.PathValue("recordId")))
		return err
	}); err != nil {
		return err
	}
	return ok(w, toRecord(rec))
}

func (a *API) putRecord(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.DNS, writeOp(r)); err != nil {
		return err
	}
	s, err := a.dnsService()
	if err != nil {
		return err
	}
	var req recordRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	rec := account.Record{ID: account.RecordID(r.PathValue("recordId")), Name: req.Name, Type: req.Type, Content: req.Content, TTL: req.TTL}
	if rec, err = s.PutRecord(r.Context(), caller.AccountID, account.ZoneID(r.PathValue("zoneId")), rec, string(caller.ID)); err != nil {
		return err
	}
	return ok(w, toRecord(rec))
}

func (a *API) deleteRecord(w http.ResponseWriter, r *http.Request, caller account.User) error {
	s, err := a.dnsService()
	if err != nil {
		return err
	}
	return adminDelete(w, caller, auth.DNS, func() error {
		return s.DeleteRecord(r.Context(), caller.AccountID, account.ZoneID(r.PathValue("zoneId")), account.RecordID(r.PathValue("recordId")), string(caller.ID))
	})
}
