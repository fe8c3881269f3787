package httpapi

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/dnsadmin"
	"github.com/wiremesh/wiremesh/management/store"
)

// DNS (/api/dns): nameserver groups and the account's DNS settings here,
// custom zones and their records in zones.go. Reads go to the store,
// changes through package dnsadmin, which validates them. Who may do what
// is the role table's: module nameservers for nameserver groups, module
// dns for the settings and zones, as in NetBird.

func (a *API) dnsRoutes(authed func(string, handler)) {
	authed("GET /api/dns/nameservers", a.listNameserverGroups)
	authed("POST /api/dns/nameservers", a.putNameserverGroup)
	authed("GET /api/dns/nameservers/{nsgroupId}", a.getNameserverGroup)
	authed("PUT /api/dns/nameservers/{nsgroupId}", a.putNameserverGroup)
	authed("DELETE /api/dns/nameservers/{nsgroupId}", a.deleteNameserverGroup)
	authed("GET /api/dns/settings", a.getDNSSettings)
	authed("PUT /api/dns/settings", a.putDNSSettings)

	authed("GET /api/dns/zones", a.listZones)
	authed("POST /api/dns/zones", a.putZone)
	authed("GET /api/dns/zones/{zoneId}", a.getZone)
	authed("PUT /api/dns/zones/{zoneId}", a.putZone)
	authed("DELETE /api/dns/zones/{zoneId}", a.deleteZone)
	authed("GET /api/dns/zones/{zoneId}/records", a.listRecords)
	authed("POST /api/dns/zones/{zoneId}/records", a.putRecord)
	authed("GET /api/dns/zones/{zoneId}/records/{recordId}", a.getRecord)
	authed("PUT /api/dns/zones/{zoneId}/records/{recordId}", a.putRecord)
	authed("DELETE /api/dns/zones/{zoneId}/records/{recordId}", a.deleteRecord)
}

// dnsInvalid is a 422 for a field the domain service never sees (it
// cannot be parsed).
func dnsInvalid(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{dnsadmin.ErrInvalid}, args...)...)
}

// dnsService is the DNS domain service, or a 500 when the server was
// wired without one.
func (a *API) dnsService() (*dnsadmin.Service, error) {
	if a.o.DNS == nil {
		return nil, fmt.Errorf("the DNS service is not configured")
	}
	return a.o.DNS, nil
}

type nameserverJSON struct {
	IP     string `json:"ip"`
	NSType string `json:"ns_type"`
	Port   int    `json:"port"`
}

type nameserverGroupRequest struct {
	Name                 string           `json:"name"`
	Description          string           `json:"description"`
	Nameservers          []nameserverJSON `json:"nameservers"`
	Enabled              bool             `json:"enabled"`
	Groups               []string         `json:"groups"`
	Primary              bool             `json:"primary"`
	Domains              []string         `json:"domains"`
	SearchDomainsEnabled bool             `json:"search_domains_enabled"`
}

type nameserverGroupJSON struct {
	ID string `json:"id"`
	nameserverGroupRequest
}

// group converts the request; the domain service checks the rest.
func (req nameserverGroupRequest) group() (account.NameserverGroup, error) {
	g := account.NameserverGroup{Name: req.Name, Description: req.Description, Enabled: req.Enabled, Groups: groupIDs(req.Groups),
		Primary: req.Primary, Domains: req.Domains, SearchDomainsEnabled: req.SearchDomainsEnabled}
	for i, ns := range req.Nameservers {
		ip, err := netip.ParseAddr(strings.TrimSpace(ns.IP))
		if err != nil {
			return g, dnsInvalid("nameservers[%d].ip: %q is not an IPv4 or IPv6 address", i, ns.IP)
		}
		g.Nameservers = append(g.Nameservers, account.Nameserver{IP: ip, NSType: ns.NSType, Port: ns.Port})
	}
	return g, nil
}

func toNameserverGroup(g account.NameserverGroup) nameserverGroupJSON {
	out := nameserverGroupJSON{ID: string(g.ID), nameserverGroupRequest: nameserverGroupRequest{Name: g.Name, Description: g.Description,
		Nameservers: make([]nameserverJSON, 0, len(g.Nameservers)), Enabled: g.Enabled, Groups: groupStrings(g.Groups), Primary: g.Primary,
		Domains: g.Domains, SearchDomainsEnabled: g.SearchDomainsEnabled}}
	for _, ns := range g.Nameservers {
		out.Nameservers = append(out.Nameservers, nameserverJSON{IP: ns.IP.String(), NSType: ns.NSType, Port: ns.Port})
	}
	if out.Domains == nil {
		out.Domains = []string{}
	}
	return out
}

func (a *API) listNameserverGroups(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var gs []account.NameserverGroup
	if err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		gs, err = tx.In(caller.AccountID).NameserverGroups(r.Context())
		return err
	}); err != nil {
		return err
	}
	out := make([]nameserverGroupJSON, 0, len(gs))
	for _, g := range gs {
		out = append(out, toNameserverGroup(g))
	}
	return ok(w, out)
}

func (a *API) getNameserverGroup(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var g account.NameserverGroup
	if err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		g, err = tx.In(caller.AccountID).NameserverGroup(r.Context(), account.NameserverGroupID(r.PathValue("nsgroupId")))
		return err
	}); err != nil {
		return err
	}
	return ok(w, toNameserverGroup(g))
}

func (a *API) putNameserverGroup(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.Nameservers, writeOp(r)); err != nil {
		return err
	}
	s, err := a.dnsService()
	if err != nil {
		return err
	}
	var req nameserverGroupRequest
	if err := decode(r, &req); err != nil {
		return err
	}
	g, err := req.group()
	if err != nil {
		return err
	}
	g.ID = account.NameserverGroupID(r.PathValue("nsgroupId"))
	if g, err = s.PutNameserverGroup(r.Context(), caller.AccountID, g, string(caller.ID)); err != nil {
		return err
	}
	return ok(w, toNameserverGroup(g))
}

func (a *API) deleteNameserverGroup(w http.ResponseWriter, r *http.Request, caller account.User) error {
	s, err := a.dnsService()
	if err != nil {
		return err
	}
	return adminDelete(w, caller, auth.Nameservers, func() error {
		return s.DeleteNameserverGroup(r.Context(), caller.AccountID, account.NameserverGroupID(r.PathValue("nsgroupId")), string(caller.ID))
	})
}

// dnsSettingsJSON is DNSSettings: a single object (SPEC-rest.md notes the
// reference's schema error). The list is a pointer so that a body without
// it is refused rather than read as "clear the list".
type dnsSettingsJSON struct {
	DisabledManagementGroups *[]string `json:"disabled_management_groups"`
}

func toDNSSettings(s account.DNSSettings) dnsSettingsJSON {
	gs := groupStrings(s.DisabledManagementGroups)
	return dnsSettingsJSON{DisabledManagementGroups: &gs}
}

func (a *API) getDNSSettings(w http.ResponseWriter, r *http.Request, caller account.User) error {
	var s account.DNSSettings
	if err := a.o.Store.Read(r.Context(), func(tx *store.Tx) error {
		var err error
		s, err = tx.In(caller.AccountID).DNSSettings(r.Context())
		return err
	}); err != nil {
		return err
	}
	return ok(w, toDNSSettings(s))
}

func (a *API) putDNSSettings(w http.ResponseWriter, r *http.Request, caller account.User) error {
	if err := requireAll(caller, auth.DNS, auth.Update); err != nil {
		return err
	}
	s, err := a.dnsService()
	if err != nil {
		return err
	}
	var req dnsSettingsJSON
	if err := decode(r, &req); err != nil {
		return err
	}
	if req.DisabledManagementGroups == nil {
		return dnsInvalid("disabled_management_groups: required (an empty list lets every peer's DNS be managed)")
	}
	set, err := s.PutSettings(r.Context(), caller.AccountID, account.DNSSettings{DisabledManagementGroups: groupIDs(*req.DisabledManagementGroups)}, string(caller.ID))
	if err != nil {
		return err
	}
	return ok(w, toDNSSettings(set))
}
