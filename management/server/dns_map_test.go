package server_test

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// dnsMapPeers registers peers a and b with a reusable key and opens their
// Sync streams: a asks for deltas (our agent), b gets whole maps (the
// official client). It returns the streams and the peers' IDs by name.
func dnsMapPeers(t *testing.T, e *env, o api) (map[string]*testpeer.Stream, map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	streams := map[string]*testpeer.Stream{}
	for _, name := range []string{"a", "b"} {
		p := testpeer.New(e.conn, name)
		p.Deltas = name == "a"
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatal(err)
		}
		s, err := p.Sync(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		streams[name] = s
	}
	ids := map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)] = obj(p)["id"].(string)
	}
	return streams, ids
}

// waitDNSMap waits until the stream's latest map satisfies ok.
func waitDNSMap(t *testing.T, name string, s *testpeer.Stream, within time.Duration, ok func(nm *mgmtpb.NetworkMap) bool) *mgmtpb.NetworkMap {
	t.Helper()
	if err := s.WaitFor(within, func([]*mgmtpb.SyncResponse) bool { return ok(s.LatestMap()) }); err != nil {
		t.Fatalf("%s: %v; last DNS config %v, fqdn %q", name, err, s.LatestMap().GetDNSConfig(), s.LatestMap().GetPeerConfig().GetFqdn())
	}
	return s.LatestMap()
}

// peerZoneNames is the names of a map's peer zone (the zone of its own
// domain), sorted as sent.
func peerZoneNames(nm *mgmtpb.NetworkMap) []string {
	_, domain, _ := strings.Cut(nm.GetPeerConfig().GetFqdn(), ".")
	var out []string
	for _, z := range nm.GetDNSConfig().GetCustomZones() {
		if z.GetDomain() == domain+"." {
			for _, r := range z.GetRecords() {
				out = append(out, r.GetName())
			}
		}
	}
	return out
}

// TestDNSDomainInMaps: a new account DNS domain (settings.dns_domain)
// reaches every peer's map within 2 s: its own FQDN, the other peers'
// FQDNs and the names of its peer zone, on a delta stream and a
// whole-map one.
func TestDNSDomainInMaps(t *testing.T) { engines.Each(t, testDNSDomainInMaps) }

func testDNSDomainInMaps(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	streams, _ := dnsMapPeers(t, e, o)
	for name, s := range streams {
		waitDNSMap(t, name, s, 5*time.Second, func(nm *mgmtpb.NetworkMap) bool {
			return len(nm.GetRemotePeers()) == 1 && len(peerZoneNames(nm)) == 2 && strings.HasSuffix(peerZoneNames(nm)[1], ".netbird.selfhosted")
		})
	}
	acc := accountOf(o)
	settings := obj(acc["settings"])
	settings["dns_domain"] = "mesh.example.org"
	o.call("PUT", "/api/accounts/"+acc["id"].(string), map[string]any{"settings": settings}, 200)
	for name, s := range streams {
		other := map[string]string{"a": "b", "b": "a"}[name]
		nm := waitDNSMap(t, name, s, 2*time.Second, func(nm *mgmtpb.NetworkMap) bool {
			names := peerZoneNames(nm)
			return nm.GetPeerConfig().GetFqdn() == name+".mesh.example.org" && len(names) == 2 &&
				names[0] == name+".mesh.example.org" && names[1] == other+".mesh.example.org" &&
				nm.GetRemotePeers()[0].GetFqdn() == other+".mesh.example.org"
		})
		for _, z := range nm.GetDNSConfig().GetCustomZones() {
			if z.GetDomain() == "netbird.selfhosted." {
				t.Errorf("%s: the old peer zone is still sent", name)
			}
		}
	}
}

// TestDNSInMaps: nameserver groups, a custom zone with records and the
// DNS settings made through the REST API reach the Sync streams as
// NetBird's DNSConfig (delta stream and whole-map one): the split group
// only to its distribution group's peer, the primary and the zone to
// both; a peer of a disabled-management group gets ServiceEnable off and
// nothing else, and everything back once the group is taken off.
func TestDNSInMaps(t *testing.T) { engines.Each(t, testDNSInMaps) }

func testDNSInMaps(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	streams, ids := dnsMapPeers(t, e, o)
	var all string
	for _, g := range list(o.call("GET", "/api/groups", nil, 200)) {
		if obj(g)["name"] == "All" {
			all = obj(g)["id"].(string)
		}
	}
	devs := obj(o.call("POST", "/api/groups", map[string]any{"name": "devs", "peers": []string{ids["a"]}}, 200))["id"].(string)
	quiet := obj(o.call("POST", "/api/groups", map[string]any{"name": "quiet", "peers": []string{ids["b"]}}, 200))["id"].(string)

	o.call("POST", "/api/dns/nameservers", map[string]any{"name": "corp", "description": "", "enabled": true, "groups": []string{devs},
		"nameservers": []map[string]any{{"ip": "10.0.0.53", "ns_type": "udp", "port": 5353}}, "primary": false,
		"domains": []string{"corp.example"}, "search_domains_enabled": true}, 200)
	o.call("POST", "/api/dns/nameservers", map[string]any{"name": "google", "description": "", "enabled": true, "groups": []string{all},
		"nameservers": []map[string]any{{"ip": "8.8.8.8", "ns_type": "udp", "port": 53}}, "primary": true, "domains": []string{},
		"search_domains_enabled": false}, 200)
	zone := obj(o.call("POST", "/api/dns/zones", map[string]any{"name": "lab", "domain": "lab.example", "enable_search_domain": false,
		"distribution_groups": []string{all}, "enabled": true}, 200))["id"].(string)
	o.call("POST", "/api/dns/zones/"+zone+"/records", map[string]any{"name": "www.lab.example", "type": "A", "content": "10.1.0.1", "ttl": 60}, 200)
	o.call("POST", "/api/dns/zones/"+zone+"/records", map[string]any{"name": "alias.lab.example", "type": "CNAME", "content": "www.lab.example", "ttl": 300}, 200)

	// summary is a DNSConfig as text: the official client's view, minus
	// the peer zone's records.
	summary := func(nm *mgmtpb.NetworkMap) string {
		dc := nm.GetDNSConfig()
		var b strings.Builder
		b.WriteString(map[bool]string{true: "on", false: "off"}[dc.GetServiceEnable()])
		for _, z := range dc.GetCustomZones() {
			b.WriteString(" zone " + z.GetDomain())
			if z.GetNonAuthoritative() {
				b.WriteString(" nonauth")
			}
			if z.GetSearchDomainDisabled() {
				b.WriteString(" nosearch")
			}
			if z.GetDomain() == "lab.example." {
				for _, r := range z.GetRecords() {
					b.WriteString(" " + r.GetName() + "/" + map[int64]string{1: "A", 5: "CNAME"}[r.GetType()] + "/" + r.GetClass() + "/" + r.GetRData())
				}
			}
		}
		for _, g := range dc.GetNameServerGroups() {
			b.WriteString(" ns")
			if g.GetPrimary() {
				b.WriteString(" primary")
			}
			for _, d := range g.GetDomains() {
				b.WriteString(" " + d)
			}
			if g.GetSearchDomainsEnabled() {
				b.WriteString(" search")
			}
			for _, ns := range g.GetNameServers() {
				b.WriteString(" " + ns.GetIP() + ":" + map[int64]string{1: "udp"}[ns.GetNSType()] + ":" + strconv.FormatInt(ns.GetPort(), 10))
			}
		}
		return b.String()
	}
	lab := " zone lab.example. nonauth nosearch alias.lab.example./CNAME/IN/www.lab.example. www.lab.example./A/IN/10.1.0.1"
	google := " ns primary 8.8.8.8:udp:53"
	want := map[string]string{
		"a": "on zone netbird.selfhosted." + lab + " ns corp.example search 10.0.0.53:udp:5353" + google,
		"b": "on zone netbird.selfhosted." + lab + google,
	}
	check := func(within time.Duration, want map[string]string) {
		t.Helper()
		for name, s := range streams {
			var last string
			if err := s.WaitFor(within, func([]*mgmtpb.SyncResponse) bool { last = summary(s.LatestMap()); return last == want[name] }); err != nil {
				t.Fatalf("%s: %v\n got %s\nwant %s", name, err, last, want[name])
			}
		}
	}
	check(5*time.Second, want)

	// b's DNS left alone: nothing for it; a, whose map is unchanged, is
	// sent nothing (what reaches a stream after b's update was sent in the
	// same round, so a short wait is enough to see it).
	updates := func(s *testpeer.Stream) int {
		n := 0
		for _, r := range s.Raw() {
			if r.GetNetworkMap() != nil || r.GetWiremeshDelta() != nil {
				n++
			}
		}
		return n
	}
	before := updates(streams["a"])
	o.call("PUT", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{quiet}}, 200)
	check(5*time.Second, map[string]string{"a": want["a"], "b": "off"})
	time.Sleep(300 * time.Millisecond)
	if n := updates(streams["a"]); n != before {
		t.Errorf("a was sent %d updates for a change of b's DNS", n-before)
	}
	o.call("PUT", "/api/dns/settings", map[string]any{"disabled_management_groups": []string{}}, 200)
	check(5*time.Second, want)
}
