package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestDNSDomainZoneClashREST: the peers' DNS domain cannot be moved onto
// or above an existing custom zone (the zone would shadow the peers'
// names, or they it): 422 naming dns_domain and the zone, and neither the
// account nor the audit log changes; a domain beside the zone is taken.
func TestDNSDomainZoneClashREST(t *testing.T) { engines.Each(t, testDNSDomainZoneClashREST) }

func testDNSDomainZoneClashREST(t *testing.T, eng storetest.Engine) {
	_, o := ownerAPI(t, eng)
	users := obj(o.call("POST", "/api/groups", map[string]any{"name": "users", "peers": []string{}}, 200))["id"].(string)
	o.call("POST", "/api/dns/zones", map[string]any{"name": "office", "domain": "svc.corp.example", "enable_search_domain": false, "distribution_groups": []string{users}}, 200)
	acc := accountOf(o)
	id := acc["id"].(string)
	state := func() string {
		b, _ := json.Marshal(map[string]any{"account": accountOf(o), "zones": o.call("GET", "/api/dns/zones", nil, 200),
			"events": len(list(o.call("GET", "/api/events/audit", nil, 200)))})
		return string(b)
	}
	settings := func(domain string) map[string]any {
		s := obj(acc["settings"])
		out := make(map[string]any, len(s))
		for k, v := range s {
			out[k] = v
		}
		out["dns_domain"] = domain
		return map[string]any{"settings": out}
	}
	for _, d := range []string{"svc.corp.example", "SVC.Corp.Example.", "corp.example"} {
		before := state()
		body := obj(o.call("PUT", "/api/accounts/"+id, settings(d), 422))
		msg, _ := body["message"].(string)
		if !strings.Contains(msg, "dns_domain") || !strings.Contains(msg, "svc.corp.example") {
			t.Errorf("dns_domain %q: message %q, want it to name dns_domain and the zone", d, msg)
		}
		if after := state(); after != before {
			t.Errorf("dns_domain %q refused but changed the state:\nbefore %s\nafter  %s", d, before, after)
		}
	}
	// Below the zone, or beside it: no clash.
	for _, d := range []string{"peers.svc.corp.example", "mesh.corp.example"} {
		got := obj(obj(o.call("PUT", "/api/accounts/"+id, settings(d), 200))["settings"])
		if got["dns_domain"] != d {
			t.Errorf("dns_domain %q: stored %v", d, got["dns_domain"])
		}
	}
}
