package engine

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/client/hostdns"
	"github.com/wiremesh/wiremesh/client/resolver"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestHostConfig: the resolver's HostConfig becomes what the host is
// told (search vs match-only domains, primary = route all) and the zones'
// address records the hosts-file entries.
func TestHostConfig(t *testing.T) {
	hc := resolver.HostConfig{Server: netip.MustParseAddrPort("100.64.0.1:53"), Primary: true,
		Domains: []resolver.HostDomain{{Name: "corp.example"}, {Name: "netbird.cloud", Search: true}}}
	// The hosts entries come from the resolver's checked zones: a CNAME,
	// a wildcard, a record outside its zone and an injected newline
	// (review finding 1) stay out.
	rc, _ := resolver.FromProto(&mgmtpb.DNSConfig{ServiceEnable: true, CustomZones: []*mgmtpb.CustomZone{{Domain: "netbird.cloud.", Records: []*mgmtpb.SimpleRecord{
		{Name: "laptop.netbird.cloud.", Type: 1, RData: "100.64.0.2"},
		{Name: "alias.netbird.cloud.", Type: 5, RData: "laptop.netbird.cloud."},
		{Name: "v6.netbird.cloud.", Type: 28, RData: "fd00::2"},
		{Name: "*.netbird.cloud.", Type: 1, RData: "100.64.0.3"},
		{Name: "bank.example.", Type: 1, RData: "100.64.0.4"},
		{Name: "peer.netbird.cloud.\n# END netbird peers\n6.6.6.6 bank.example", Type: 1, RData: "100.64.0.5"},
	}}}})
	zones := resolver.HostAddresses(rc.Zones)
	want := hostdns.Config{Server: hc.Server, RouteAll: true,
		Domains: []hostdns.Domain{{Name: "corp.example", MatchOnly: true}, {Name: "netbird.cloud"}},
		Hosts: []hostdns.HostEntry{{Name: "laptop.netbird.cloud.", Addr: netip.MustParseAddr("100.64.0.2")},
			{Name: "v6.netbird.cloud.", Addr: netip.MustParseAddr("fd00::2")}}}
	if d := cmp.Diff(want, hostConfig(hc, zones), cmp.Comparer(func(a, b netip.Addr) bool { return a == b }), cmp.Comparer(func(a, b netip.AddrPort) bool { return a == b })); d != "" {
		t.Errorf("hostConfig (-want +got):\n%s", d)
	}
	var nilHost *hostDNS
	if ups, err := nilHost.point(hc, zones); ups != nil || err != nil {
		t.Errorf("a nil hostDNS must leave the host alone: %v %v", ups, err)
	}
}
