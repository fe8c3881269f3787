package httpapi_test

import "testing"

// conformDNS drives /api/dns (nameserver groups, settings, zones and
// records): every operation answered 2xx with a document-conforming body,
// and bad requests 422.
func conformDNS(t *testing.T, d *docRig) {
	t.Helper()
	grp := str(d.call("POST", "/api/groups", "/api/groups", map[string]any{"name": "dns users", "peers": []string{}}, 200), "id")

	ns := map[string]any{"name": "corp", "description": "split DNS", "nameservers": []any{map[string]any{"ip": "10.0.0.53", "ns_type": "udp", "port": 53}},
		"enabled": true, "groups": []string{grp}, "primary": false, "domains": []string{"corp.example"}, "search_domains_enabled": true}
	id := str(d.call("POST", "/api/dns/nameservers", "/api/dns/nameservers", ns, 200), "id")
	d.call("POST", "/api/dns/nameservers", "/api/dns/nameservers", map[string]any{"name": "primary", "description": "", "nameservers": []any{map[string]any{"ip": "1.1.1.1", "ns_type": "udp", "port": 53}},
		"enabled": true, "groups": []string{grp}, "primary": true, "domains": []string{}, "search_domains_enabled": false}, 200)
	d.call("POST", "/api/dns/nameservers", "/api/dns/nameservers", map[string]any{"name": "bad", "description": "", "nameservers": []any{},
		"enabled": true, "groups": []string{grp}, "primary": true, "domains": []string{}, "search_domains_enabled": false}, 422)
	d.call("GET", "/api/dns/nameservers", "/api/dns/nameservers", nil, 200)
	d.call("GET", "/api/dns/nameservers/{nsgroupId}", "/api/dns/nameservers/"+id, nil, 200)
	ns["enabled"] = false
	d.call("PUT", "/api/dns/nameservers/{nsgroupId}", "/api/dns/nameservers/"+id, ns, 200)
	d.call("DELETE", "/api/dns/nameservers/{nsgroupId}", "/api/dns/nameservers/"+id, nil, 200)
	d.call("GET", "/api/dns/nameservers/{nsgroupId}", "/api/dns/nameservers/"+id, nil, 404)

	d.call("GET", "/api/dns/settings", "/api/dns/settings", nil, 200)
	d.call("PUT", "/api/dns/settings", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{grp}}, 200)
	d.call("PUT", "/api/dns/settings", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{"nope"}}, 422)
	d.call("PUT", "/api/dns/settings", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{}}, 200)

	zone := map[string]any{"name": "internal", "domain": "internal.example", "enable_search_domain": false, "distribution_groups": []string{grp}}
	z := str(d.call("POST", "/api/dns/zones", "/api/dns/zones", zone, 200), "id")
	d.call("POST", "/api/dns/zones", "/api/dns/zones", map[string]any{"name": "x", "domain": "not a domain", "enable_search_domain": false, "distribution_groups": []string{grp}}, 422)
	rec := map[string]any{"name": "db.internal.example", "type": "A", "content": "10.1.0.5", "ttl": 300}
	r := str(d.call("POST", "/api/dns/zones/{zoneId}/records", "/api/dns/zones/"+z+"/records", rec, 200), "id")
	d.call("POST", "/api/dns/zones/{zoneId}/records", "/api/dns/zones/"+z+"/records", map[string]any{"name": "db.other.example", "type": "A", "content": "10.1.0.5", "ttl": 300}, 422)
	d.call("GET", "/api/dns/zones", "/api/dns/zones", nil, 200)
	d.call("GET", "/api/dns/zones/{zoneId}", "/api/dns/zones/"+z, nil, 200)
	zone["enabled"] = false
	d.call("PUT", "/api/dns/zones/{zoneId}", "/api/dns/zones/"+z, zone, 200)
	d.call("GET", "/api/dns/zones/{zoneId}/records", "/api/dns/zones/"+z+"/records", nil, 200)
	d.call("GET", "/api/dns/zones/{zoneId}/records/{recordId}", "/api/dns/zones/"+z+"/records/"+r, nil, 200)
	rec["ttl"] = 60
	d.call("PUT", "/api/dns/zones/{zoneId}/records/{recordId}", "/api/dns/zones/"+z+"/records/"+r, rec, 200)
	d.call("DELETE", "/api/dns/zones/{zoneId}/records/{recordId}", "/api/dns/zones/"+z+"/records/"+r, nil, 200)
	d.call("DELETE", "/api/dns/zones/{zoneId}", "/api/dns/zones/"+z, nil, 200)
	d.call("GET", "/api/dns/zones/{zoneId}", "/api/dns/zones/"+z, nil, 404)
}
