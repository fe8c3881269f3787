package server_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/management/storetest"
)

// dnsState is everything the DNS API shows plus the number of audit
// events: a refused request must change none of it.
func dnsState(t *testing.T, o api) string {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"ns": o.call("GET", "/api/dns/nameservers", nil, 200), "settings": o.call("GET", "/api/dns/settings", nil, 200),
		"zones": o.call("GET", "/api/dns/zones", nil, 200), "events": len(list(o.call("GET", "/api/events/audit", nil, 200)))})
	return string(b)
}

func dnsRefused(t *testing.T, o api, method, path string, body any, want int, msg string) {
	t.Helper()
	before := dnsState(t, o)
	got := obj(o.call(method, path, body, want))
	if m, _ := got["message"].(string); !strings.Contains(m, msg) {
		t.Errorf("%s %s: message %q, want it to contain %q", method, path, m, msg)
	}
	if after := dnsState(t, o); after != before {
		t.Errorf("%s %s answered %d but changed the state:\nbefore %s\nafter  %s", method, path, want, before, after)
	}
}

// TestDNSREST: the 17 /api/dns operations through the real server with
// NetBird's shapes, every validation rule answering 422 (duplicates 409)
// with a message naming the field and nothing stored, and groups that DNS
// names not deletable.
func TestDNSREST(t *testing.T) { engines.Each(t, testDNSREST) }

func testDNSREST(t *testing.T, eng storetest.Engine) {
	_, o := ownerAPI(t, eng)
	users := obj(o.call("POST", "/api/groups", map[string]any{"name": "users", "peers": []string{}}, 200))["id"].(string)
	ops := obj(o.call("POST", "/api/groups", map[string]any{"name": "ops", "peers": []string{}}, 200))["id"].(string)
	var overlay string
	for _, a := range list(o.call("GET", "/api/accounts", nil, 200)) {
		overlay = obj(obj(a)["settings"])["network_range"].(string)
	}
	inOverlay := strings.Split(overlay, "/")[0]
	inOverlay = inOverlay[:strings.LastIndex(inOverlay, ".")] + ".7"

	// Nameserver groups.
	base := map[string]any{"name": "corp", "description": "office resolvers", "nameservers": []any{map[string]any{"ip": "10.0.0.53", "ns_type": "udp", "port": 53},
		map[string]any{"ip": "fd00::53", "ns_type": "udp", "port": 5353}}, "enabled": true, "groups": []string{users}, "primary": false,
		"domains": []string{"Corp.Example", "bücher.example"}, "search_domains_enabled": true}
	g := obj(o.call("POST", "/api/dns/nameservers", base, 200))
	want := map[string]any{"id": g["id"], "name": "corp", "description": "office resolvers", "nameservers": []any{map[string]any{"ip": "10.0.0.53", "ns_type": "udp", "port": float64(53)},
		map[string]any{"ip": "fd00::53", "ns_type": "udp", "port": float64(5353)}}, "enabled": true, "groups": []any{users}, "primary": false,
		"domains": []any{"corp.example", "xn--bcher-kva.example"}, "search_domains_enabled": true}
	if got, _ := json.Marshal(g); string(got) != jsonText(want) {
		t.Errorf("created nameserver group\n got %s\nwant %s", got, jsonText(want))
	}
	gid := g["id"].(string)
	if got := obj(o.call("GET", "/api/dns/nameservers/"+gid, nil, 200)); jsonText(got) != jsonText(want) {
		t.Errorf("get nameserver group %s", jsonText(got))
	}
	prim := obj(o.call("POST", "/api/dns/nameservers", withField(base, "name", "all", "primary", true, "domains", []string{}, "search_domains_enabled", false), 200))
	base = withField(base, "name", "fresh") // each case breaks one rule only
	for _, c := range []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{withField(base, "name", ""), 422, "name: must have 1 to 40"},
		{withField(base, "name", strings.Repeat("n", 41)), 422, "name: must have 1 to 40"},
		{withField(base, "name", "all"), 422, "already exists"},
		{withField(base, "description", strings.Repeat("d", 1025)), 422, "description:"},
		{withField(base, "nameservers", []any{}), 422, "nameservers: 0 given"},
		{withField(base, "nameservers", []any{map[string]any{"ip": "not-ip", "ns_type": "udp", "port": 53}}), 422, "nameservers[0].ip"},
		{withField(base, "nameservers", []any{map[string]any{"ip": inOverlay, "ns_type": "udp", "port": 53}}), 422, "inside the account's peer network"},
		{withField(base, "nameservers", []any{map[string]any{"ip": "0.0.0.0", "ns_type": "udp", "port": 53}}), 422, "not a unicast"},
		{withField(base, "nameservers", []any{map[string]any{"ip": "10.0.0.53", "ns_type": "tcp", "port": 53}}), 422, "ns_type"},
		{withField(base, "nameservers", []any{map[string]any{"ip": "10.0.0.53", "ns_type": "udp", "port": 0}}), 422, "port"},
		{withField(base, "primary", true), 422, "primary:"},
		{withField(base, "domains", []string{}), 422, "domains: required"},
		{withField(base, "domains", []string{"bad domain"}), 422, "domains:"},
		{withField(base, "groups", []string{}), 422, "groups: at least one group"},
		{withField(base, "groups", []string{"nope"}), 422, `groups: group "nope" does not exist`},
	} {
		dnsRefused(t, o, "POST", "/api/dns/nameservers", c.body, c.status, c.msg)
	}
	dnsRefused(t, o, "PUT", "/api/dns/nameservers/"+gid, withField(base, "domains", []string{}), 422, "domains: required")
	upd := obj(o.call("PUT", "/api/dns/nameservers/"+gid, withField(base, "name", "corp", "enabled", false, "groups", []string{users, ops}), 200))
	if upd["id"] != gid || upd["enabled"] != false || len(list(upd["groups"])) != 2 {
		t.Errorf("updated nameserver group %v", upd)
	}
	if l := list(o.call("GET", "/api/dns/nameservers", nil, 200)); len(l) != 2 {
		t.Errorf("nameserver groups %v, want 2", l)
	}
	o.call("PUT", "/api/dns/nameservers/nope", base, 404)

	// Settings: a single object, empty until saved.
	if s := o.call("GET", "/api/dns/settings", nil, 200); jsonText(s) != `{"disabled_management_groups":[]}` {
		t.Errorf("settings %s", jsonText(s))
	}
	dnsRefused(t, o, "PUT", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{"nope"}}, 422, "disabled_management_groups")
	dnsRefused(t, o, "PUT", "/api/dns/settings", map[string]any{}, 422, "disabled_management_groups: required")
	if s := o.call("PUT", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{ops}}, 200); jsonText(s) != `{"disabled_management_groups":["`+ops+`"]}` {
		t.Errorf("saved settings %s", jsonText(s))
	}

	// Zones and records.
	zbase := map[string]any{"name": "internal", "domain": "Internal.Example", "enable_search_domain": true, "distribution_groups": []string{users}}
	z := obj(o.call("POST", "/api/dns/zones", zbase, 200))
	zid := z["id"].(string)
	if z["domain"] != "internal.example" || z["enabled"] != true || jsonText(z["records"]) != "[]" {
		t.Errorf("created zone %v", z)
	}
	var peerDomain string
	for _, a := range list(o.call("GET", "/api/accounts", nil, 200)) {
		peerDomain = obj(obj(a)["settings"])["dns_domain"].(string)
	}
	zfresh := withField(zbase, "domain", "fresh.example")
	for _, c := range []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{withField(zfresh, "name", ""), 422, "name:"},
		{withField(zbase, "domain", "bad domain"), 422, "domain:"},
		{withField(zbase, "domain", "peers."+peerDomain), 422, "conflicts with the peers' DNS domain"},
		{withField(zfresh, "distribution_groups", []string{}), 422, "distribution_groups: at least one"},
		{withField(zfresh, "distribution_groups", []string{"nope"}), 422, "does not exist"},
		{withField(zbase, "name", "again"), 409, "zone with domain internal.example already exists"},
	} {
		dnsRefused(t, o, "POST", "/api/dns/zones", c.body, c.status, c.msg)
	}
	dnsRefused(t, o, "PUT", "/api/dns/zones/"+zid, withField(zbase, "domain", "moved.example"), 422, "cannot be changed")
	recPath := "/api/dns/zones/" + zid + "/records"
	a := obj(o.call("POST", recPath, map[string]any{"name": "db.internal.example", "type": "A", "content": "10.1.0.5", "ttl": 300}, 200))
	o.call("POST", recPath, map[string]any{"name": "db.internal.example", "type": "AAAA", "content": "FD00::5", "ttl": 60}, 200)
	c1 := obj(o.call("POST", recPath, map[string]any{"name": "app.internal.example", "type": "CNAME", "content": "web.internal.example", "ttl": 60}, 200))
	for _, c := range []struct {
		body   map[string]any
		status int
		msg    string
	}{
		{map[string]any{"name": "db.other.example", "type": "A", "content": "10.1.0.6", "ttl": 1}, 422, "is not in the zone"},
		{map[string]any{"name": "x.internal.example", "type": "A", "content": "fd00::1", "ttl": 1}, 422, "an A record holds an IPv4"},
		{map[string]any{"name": "x.internal.example", "type": "AAAA", "content": "10.0.0.1", "ttl": 1}, 422, "an AAAA record holds an IPv6"},
		{map[string]any{"name": "x.internal.example", "type": "TXT", "content": "hi", "ttl": 1}, 422, "type:"},
		{map[string]any{"name": "x.internal.example", "type": "A", "content": "10.0.0.1", "ttl": -1}, 422, "ttl:"},
		{map[string]any{"name": "x.internal.example", "type": "CNAME", "content": "x.internal.example", "ttl": 1}, 422, "own name"},
		{map[string]any{"name": "web.internal.example", "type": "CNAME", "content": "app.internal.example", "ttl": 1}, 422, "CNAME loop"},
		{map[string]any{"name": "db.internal.example", "type": "CNAME", "content": "app.internal.example", "ttl": 1}, 422, "already has a A record"},
		{map[string]any{"name": "db.internal.example", "type": "A", "content": "10.1.0.5", "ttl": 5}, 409, "identical"},
	} {
		dnsRefused(t, o, "POST", recPath, c.body, c.status, c.msg)
	}
	o.call("POST", "/api/dns/zones/nope/records", map[string]any{"name": "x.internal.example", "type": "A", "content": "10.0.0.1", "ttl": 1}, 404)
	upr := obj(o.call("PUT", recPath+"/"+a["id"].(string), map[string]any{"name": "db.internal.example", "type": "A", "content": "10.1.0.9", "ttl": 30}, 200))
	if upr["content"] != "10.1.0.9" || upr["id"] != a["id"] {
		t.Errorf("updated record %v", upr)
	}
	if got := obj(o.call("GET", recPath+"/"+a["id"].(string), nil, 200)); jsonText(got) != jsonText(upr) {
		t.Errorf("get record %v, want %v", got, upr)
	}
	if l := list(o.call("GET", recPath, nil, 200)); len(l) != 3 {
		t.Errorf("records %v, want 3", l)
	}
	zu := obj(o.call("PUT", "/api/dns/zones/"+zid, withField(zbase, "name", "intranet", "enabled", false), 200))
	if zu["name"] != "intranet" || zu["enabled"] != false || len(list(zu["records"])) != 3 {
		t.Errorf("updated zone %v", zu)
	}
	if l := list(o.call("GET", "/api/dns/zones", nil, 200)); len(l) != 1 || len(list(obj(l[0])["records"])) != 3 {
		t.Errorf("zones %v", l)
	}

	// Groups DNS names cannot be deleted, with NetBird's messages.
	refusedGroup := func(id, msg string) {
		t.Helper()
		got := obj(o.call("DELETE", "/api/groups/"+id, nil, 412))
		if m, _ := got["message"].(string); !strings.Contains(m, msg) {
			t.Errorf("delete group: %q, want %q", m, msg)
		}
	}
	o.call("DELETE", "/api/dns/nameservers/"+prim["id"].(string), nil, 200)
	refusedGroup(users, "group has been linked to name server groups: corp")
	o.call("DELETE", "/api/dns/nameservers/"+gid, nil, 200)
	refusedGroup(users, "group has been linked to DNS zone: intranet")
	refusedGroup(ops, "group has been linked to disabled DNS management groups: ops")

	// Deletions, with the audit codes NetBird uses.
	o.call("DELETE", recPath+"/"+c1["id"].(string), nil, 200)
	o.call("DELETE", recPath+"/"+c1["id"].(string), nil, 404)
	o.call("DELETE", "/api/dns/zones/"+zid, nil, 200)
	o.call("GET", recPath, nil, 404)
	o.call("PUT", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{}}, 200)
	o.call("DELETE", "/api/groups/"+users, nil, 200)
	o.call("DELETE", "/api/groups/"+ops, nil, 200)
	codes := map[string]bool{}
	for _, e := range list(o.call("GET", "/api/events/audit", nil, 200)) {
		codes[obj(e)["activity_code"].(string)] = true
	}
	for _, c := range []string{"nameserver.group.add", "nameserver.group.update", "nameserver.group.delete", "dns.setting.disabled.management.group.add",
		"dns.setting.disabled.management.group.delete", "dns.zone.create", "dns.zone.update", "dns.zone.delete", "dns.zone.record.create",
		"dns.zone.record.update", "dns.zone.record.delete"} {
		if !codes[c] {
			t.Errorf("no %s event", c)
		}
	}
}
