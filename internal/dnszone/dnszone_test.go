package dnszone

import (
	"net/netip"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

func TestPeers(t *testing.T) {
	z := Peers("NetBird.selfhosted", []Host{
		{FQDN: "self.netbird.selfhosted", IP: netip.MustParseAddr("100.64.0.5")},
		{FQDN: "B.netbird.selfhosted.", IP: netip.MustParseAddr("100.64.0.2")},
		{FQDN: "x.other.example", IP: netip.MustParseAddr("100.64.0.3")},    // outside
		{FQDN: "netbird.selfhosted", IP: netip.MustParseAddr("100.64.0.4")}, // the apex
		{FQDN: "v6.netbird.selfhosted", IP: netip.MustParseAddr("fd00::1")},
	})
	if z.Domain != "netbird.selfhosted." || len(z.Records) != 2 || z.Records[0].Name != "self.netbird.selfhosted" || z.Records[1].Name != "b.netbird.selfhosted" ||
		z.Records[1].RData != "100.64.0.2" || z.Records[1].Type != 1 || z.Records[1].Class != "IN" {
		t.Fatalf("%v", z)
	}
}

// TestRefresh: a map whose peers changed gets the zone management would
// send for it (itself first, then the others by address).
func TestRefresh(t *testing.T) {
	nm := &mgmtpb.NetworkMap{
		PeerConfig: &mgmtpb.PeerConfig{Address: "100.64.0.9/16", Fqdn: "me.netbird.selfhosted"},
		RemotePeers: []*mgmtpb.RemotePeerConfig{
			{Fqdn: "z.netbird.selfhosted", AllowedIps: []string{"100.64.0.3/32"}},
			{Fqdn: "a.netbird.selfhosted", AllowedIps: []string{"100.64.0.20/32"}},
		},
		DNSConfig: &mgmtpb.DNSConfig{ServiceEnable: true, CustomZones: []*mgmtpb.CustomZone{{Domain: "netbird.selfhosted.", SearchDomainDisabled: true}}},
	}
	Refresh(nm)
	want := Peers("netbird.selfhosted", []Host{
		{FQDN: "me.netbird.selfhosted", IP: netip.MustParseAddr("100.64.0.9")},
		{FQDN: "z.netbird.selfhosted", IP: netip.MustParseAddr("100.64.0.3")},
		{FQDN: "a.netbird.selfhosted", IP: netip.MustParseAddr("100.64.0.20")},
	})
	want.SearchDomainDisabled = true
	if got := nm.DNSConfig.CustomZones[0]; !proto.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	off := &mgmtpb.NetworkMap{PeerConfig: nm.PeerConfig, RemotePeers: nm.RemotePeers, DNSConfig: &mgmtpb.DNSConfig{}}
	Refresh(off)
	if len(off.DNSConfig.CustomZones) != 0 {
		t.Fatal("DNS off: no zone may appear")
	}
}
