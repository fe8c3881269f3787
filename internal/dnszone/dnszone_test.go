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

// TestRefreshIPv6: the AAAA records follow the v6 addresses the map
// carries: its own address_v6, and a remote peer's /128 (listed only when
// both ends are on the IPv6 overlay); each right after the host's A record.
func TestRefreshIPv6(t *testing.T) {
	v6self := append(netip.MustParseAddr("fd00:1::9").AsSlice(), 64)
	nm := &mgmtpb.NetworkMap{
		PeerConfig: &mgmtpb.PeerConfig{Address: "100.64.0.9/16", AddressV6: v6self, Fqdn: "me.netbird.selfhosted"},
		RemotePeers: []*mgmtpb.RemotePeerConfig{
			{Fqdn: "z.netbird.selfhosted", AllowedIps: []string{"100.64.0.3/32", "fd00:1::3/128"}},
			{Fqdn: "a.netbird.selfhosted", AllowedIps: []string{"100.64.0.20/32"}},
			{Fqdn: "m.netbird.selfhosted", AllowedIps: []string{"100.64.0.4/32", "fd00:9::/64", "::ffff:1.2.3.4/128"}},
		},
		DNSConfig: &mgmtpb.DNSConfig{ServiceEnable: true, CustomZones: []*mgmtpb.CustomZone{{Domain: "netbird.selfhosted."}}},
	}
	Refresh(nm)
	type rec struct {
		name  string
		typ   int64
		rdata string
	}
	var got []rec
	for _, r := range nm.DNSConfig.CustomZones[0].Records {
		got = append(got, rec{r.Name, r.Type, r.RData})
	}
	want := []rec{
		{"me.netbird.selfhosted", 1, "100.64.0.9"}, {"me.netbird.selfhosted", 28, "fd00:1::9"},
		{"z.netbird.selfhosted", 1, "100.64.0.3"}, {"z.netbird.selfhosted", 28, "fd00:1::3"},
		{"m.netbird.selfhosted", 1, "100.64.0.4"},
		{"a.netbird.selfhosted", 1, "100.64.0.20"},
	}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	// A malformed address_v6 gives no AAAA for the peer itself.
	nm.PeerConfig.AddressV6 = []byte{1, 2, 3}
	Refresh(nm)
	if r := nm.DNSConfig.CustomZones[0].Records[1]; r.Type != 1 {
		t.Fatalf("malformed address_v6 still gives %v", r)
	}
}

// FuzzRefresh: whatever map a server sends, Refresh does not panic and
// builds only well-formed A and AAAA records.
func FuzzRefresh(f *testing.F) {
	seed := &mgmtpb.NetworkMap{
		PeerConfig:  &mgmtpb.PeerConfig{Address: "100.64.0.9/16", AddressV6: append(netip.MustParseAddr("fd00::9").AsSlice(), 64), Fqdn: "me.d.test"},
		RemotePeers: []*mgmtpb.RemotePeerConfig{{Fqdn: "z.d.test", AllowedIps: []string{"100.64.0.3/32", "fd00::3/128"}}},
		DNSConfig:   &mgmtpb.DNSConfig{ServiceEnable: true, CustomZones: []*mgmtpb.CustomZone{{Domain: "d.test."}}},
	}
	b, _ := proto.Marshal(seed)
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		var nm mgmtpb.NetworkMap
		if proto.Unmarshal(b, &nm) != nil {
			return
		}
		Refresh(&nm)
		for _, z := range nm.GetDNSConfig().GetCustomZones() {
			for _, r := range z.GetRecords() {
				a, err := netip.ParseAddr(r.GetRData())
				if err != nil {
					continue // a record the server sent, left as is
				}
				if r.GetType() == 28 && (!a.Is6() || a.Is4In6()) || r.GetType() == 1 && !a.Is4() {
					t.Fatalf("record %v", r)
				}
			}
		}
	})
}
