package resolver

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

const inject = "\nnameserver 6.6.6.6\noptions ndots:15"

// TestFromProtoRefusesUnsafeNames (review finding 2): names with
// newlines or spaces never get into the Config, the HostConfig (which
// goes to resolv.conf, NetworkManager and resolved) or the hosts entries.
func TestFromProtoRefusesUnsafeNames(t *testing.T) {
	p := &mgmtpb.DNSConfig{ServiceEnable: true,
		CustomZones: []*mgmtpb.CustomZone{
			{Domain: "evil.example" + inject},
			{Domain: "netbird.cloud.", Records: []*mgmtpb.SimpleRecord{
				{Name: "ok.netbird.cloud.", Type: 1, RData: "100.64.0.2"},
				{Name: "peer.netbird.cloud.\n# END netbird peers\n6.6.6.6 bank.example", Type: 1, RData: "100.64.0.3"},
				{Name: "c.netbird.cloud.", Type: 5, RData: "x y.example."},
				{Name: "*.netbird.cloud.", Type: 1, RData: "100.64.0.4"},
				{Name: "bank.example.", Type: 1, RData: "100.64.0.5"},
			}}},
		NameServerGroups: []*mgmtpb.NameServerGroup{{Domains: []string{"corp.example" + inject, "good.example"}, SearchDomainsEnabled: true,
			NameServers: []*mgmtpb.NameServer{{IP: "192.0.2.53", NSType: 1, Port: 53}}}},
	}
	cfg, err := FromProto(p)
	if !errors.Is(err, ErrSkipped) {
		t.Fatalf("err = %v, want ErrSkipped", err)
	}
	hc := hostConfig(netip.MustParseAddrPort("100.64.0.1:53"), cfg)
	if got := strings.Join(hc.MatchDomains(), ","); got != "good.example,netbird.cloud" {
		t.Errorf("host domains %q", got)
	}
	// hostConfig checks on its own too, whatever Config it is given.
	raw := Config{Zones: []Zone{{Domain: "a.example" + inject, Search: true}}, Groups: []NameserverGroup{{Servers: cfg.Groups[0].Servers, Domains: []string{"b c.example"}}}}
	if d := hostConfig(netip.AddrPort{}, raw).Domains; len(d) != 0 {
		t.Errorf("hostConfig passed unsafe domains %v", d)
	}
	ha := HostAddresses(cfg.Zones)
	if len(ha) != 1 || ha[0].Name != "ok.netbird.cloud." || ha[0].Addr != netip.MustParseAddr("100.64.0.2") {
		t.Errorf("HostAddresses = %v, want only ok.netbird.cloud", ha)
	}
	// A Config built by hand (not through FromProto) is checked by the
	// zones too.
	zt, problems := buildZones([]Zone{{Domain: "x.example" + inject}, {Domain: "y.example", Records: []Record{{Name: "a\nb.y.example", Type: 1, Data: "192.0.2.1"}}}})
	if len(problems) != 2 || zt.find("y.example.") == nil || len(zt.find("y.example.").rrs) != 0 {
		t.Errorf("buildZones: problems %q", problems)
	}
}

// TestFromProtoRefusesBadNameservers (review finding 5): loopback (incl.
// systemd-resolved's 127.0.0.53), unspecified, multicast, zoned, overlay
// and the resolver's own address are skipped; the rest applies.
func TestFromProtoRefusesBadNameservers(t *testing.T) {
	local := Local{Self: netip.MustParseAddr("100.64.0.1"), Overlay: netip.MustParsePrefix("100.64.0.0/16")}
	bad := []string{"127.0.0.53", "127.0.0.54", "127.0.0.1", "::1", "0.0.0.0", "::", "224.0.0.251", "ff02::fb", "255.255.255.255",
		"fe80::1%eth0", "100.64.0.1", "100.64.9.9", "::ffff:127.0.0.53"}
	for _, ip := range bad {
		p := &mgmtpb.DNSConfig{ServiceEnable: true, NameServerGroups: []*mgmtpb.NameServerGroup{{Primary: true,
			NameServers: []*mgmtpb.NameServer{{IP: ip, NSType: 1, Port: 5353}, {IP: "192.0.2.53", NSType: 1, Port: 53}}}}}
		cfg, err := local.FromProto(p)
		if !errors.Is(err, ErrSkipped) || len(cfg.Groups) != 1 || len(cfg.Groups[0].Servers) != 1 || cfg.Groups[0].Servers[0] != netip.MustParseAddrPort("192.0.2.53:53") {
			t.Errorf("%s: cfg %+v err %v, want it skipped", ip, cfg, err)
		}
	}
	// Without Local the address-independent checks still hold.
	p := &mgmtpb.DNSConfig{ServiceEnable: true, NameServerGroups: []*mgmtpb.NameServerGroup{{Primary: true,
		NameServers: []*mgmtpb.NameServer{{IP: "127.0.0.53", NSType: 1, Port: 53}}}}}
	if cfg, err := FromProto(p); len(cfg.Groups) != 0 || !errors.Is(err, ErrSkipped) {
		t.Errorf("127.0.0.53 accepted: %+v %v", cfg, err)
	}
}
