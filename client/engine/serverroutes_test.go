package engine

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/forward"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

func TestServingFromMap(t *testing.T) {
	self, other := mustKey(t), mustKey(t)
	lan := netip.MustParsePrefix("192.168.50.0/24")
	pfx := netip.MustParsePrefix
	any4, any6 := pfx("0.0.0.0/0"), pfx("::/0")
	web := &mgmtpb.RouteFirewallRule{SourceRanges: []string{"100.70.0.2/32"}, Action: mgmtpb.RuleAction_ACCEPT, Destination: "192.168.50.0/24",
		Protocol: mgmtpb.RuleProtocol_TCP, PortInfo: &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Port{Port: 80}}, RouteID: "r1"}
	tests := []struct {
		name   string
		routes []*mgmtpb.Route
		rules  []*mgmtpb.RouteFirewallRule
		empty  bool
		// overlay6: the overlay carries IPv6
		overlay6 bool
		want     serving
		warns    int
	}{
		{name: "no routes", want: serving{}},
		{name: "someone else's route", routes: []*mgmtpb.Route{{ID: "r1", Network: "192.168.50.0/24", NetworkType: netTypeIPv4, Peer: other.String()}}, want: serving{}},
		{name: "legacy: no rules, not marked empty",
			routes: []*mgmtpb.Route{{ID: "r1", Network: "192.168.50.0/24", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true}},
			want:   serving{Routes: []forward.Route{{Network: lan, Masquerade: true}}, Routing: acl.Routing{Networks: []netip.Prefix{lan}, AllowAll: true}}},
		{name: "marked empty: default deny",
			routes: []*mgmtpb.Route{{ID: "r1", Network: "192.168.50.0/24", NetworkType: netTypeIPv4, Peer: self.String()}}, empty: true,
			want: serving{Routes: []forward.Route{{Network: lan}}, Routing: acl.Routing{Networks: []netip.Prefix{lan}}}},
		{name: "rules by port and range",
			routes: []*mgmtpb.Route{{ID: "r1", Network: "192.168.50.0/24", NetworkType: netTypeIPv4, Peer: self.String()}},
			rules: []*mgmtpb.RouteFirewallRule{web, {SourceRanges: []string{"0.0.0.0/0"}, Action: mgmtpb.RuleAction_DROP, Destination: "192.168.50.7/32",
				Protocol: mgmtpb.RuleProtocol_UDP, PortInfo: &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Range_{Range: &mgmtpb.PortInfo_Range{Start: 5000, End: 5100}}}}},
			want: serving{Routes: []forward.Route{{Network: lan}}, Routing: acl.Routing{Networks: []netip.Prefix{lan}, Rules: []acl.RouteRule{
				{Sources: []netip.Prefix{pfx("100.70.0.2/32")}, Dests: []netip.Prefix{lan}, Accept: true, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80},
				{Dests: []netip.Prefix{pfx("192.168.50.7/32")}, Proto: acl.ProtoUDP, PortLo: 5000, PortHi: 5100},
			}}}},
		{name: "HA duplicates merge, masquerade if any asks",
			routes: []*mgmtpb.Route{
				{ID: "r1", Network: "192.168.50.0/24", NetworkType: netTypeIPv4, Peer: self.String()},
				{ID: "r2", Network: "192.168.50.0/24", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true},
			},
			want: serving{Routes: []forward.Route{{Network: lan, Masquerade: true}}, Routing: acl.Routing{Networks: []netip.Prefix{lan}, AllowAll: true}}},
		{name: "exit node v4 and v6 over an IPv4 overlay: v6 not served, with a warning",
			routes: []*mgmtpb.Route{
				{ID: "e4", Network: "0.0.0.0/0", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true},
				{ID: "e6", Network: "::/0", NetworkType: netTypeIPv6, Peer: self.String(), Masquerade: true},
			},
			want: serving{Routes: []forward.Route{{Network: any4, Masquerade: true}},
				Routing: acl.Routing{Networks: []netip.Prefix{any4}, AllowAll: true}},
			warns: 1},
		{name: "exit node v4 and v6 over an IPv6-capable overlay", overlay6: true,
			routes: []*mgmtpb.Route{
				{ID: "e4", Network: "0.0.0.0/0", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true},
				{ID: "e6", Network: "::/0", NetworkType: netTypeIPv6, Peer: self.String(), Masquerade: true},
			},
			want: serving{Routes: []forward.Route{{Network: any4, Masquerade: true}, {Network: any6, Masquerade: true}},
				Routing: acl.Routing{Networks: []netip.Prefix{any4, any6}, AllowAll: true}}},
		{name: "exit node with NetBird's route firewall rules and their IPv6 twins", overlay6: true,
			routes: []*mgmtpb.Route{
				{ID: "e4", Network: "0.0.0.0/0", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true},
				{ID: "e4-v6-default", Network: "::/0", NetworkType: netTypeIPv6, Peer: self.String(), Masquerade: true},
			},
			rules: []*mgmtpb.RouteFirewallRule{
				{SourceRanges: []string{"100.70.0.2/32"}, Action: mgmtpb.RuleAction_ACCEPT, Destination: "0.0.0.0/0", Protocol: mgmtpb.RuleProtocol_ALL, RouteID: "e4"},
				{SourceRanges: []string{"fd00:1234::2/128"}, Action: mgmtpb.RuleAction_ACCEPT, Destination: "::/0", Protocol: mgmtpb.RuleProtocol_ICMP, RouteID: "e4-v6-default"},
				{SourceRanges: []string{"fd00:1234::/64"}, Action: mgmtpb.RuleAction_DROP, Destination: "::/0", Protocol: mgmtpb.RuleProtocol_TCP,
					PortInfo: &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Port{Port: 25}}, RouteID: "e4-v6-default"},
			},
			want: serving{Routes: []forward.Route{{Network: any4, Masquerade: true}, {Network: any6, Masquerade: true}},
				Routing: acl.Routing{Networks: []netip.Prefix{any4, any6}, Rules: []acl.RouteRule{
					{Sources: []netip.Prefix{pfx("100.70.0.2/32")}, Dests: []netip.Prefix{any4}, Accept: true},
					{Sources: []netip.Prefix{pfx("fd00:1234::2/128")}, Dests: []netip.Prefix{any6}, Accept: true, Proto: acl.ProtoICMP},
					{Sources: []netip.Prefix{pfx("fd00:1234::/64")}, Dests: []netip.Prefix{any6}, Proto: acl.ProtoTCP, PortLo: 25, PortHi: 25},
				}}}},
		{name: "IPv6 network route with an IPv6 source range", overlay6: true,
			routes: []*mgmtpb.Route{{ID: "l6", Network: "2001:db8:50::/64", NetworkType: netTypeIPv6, Peer: self.String()}},
			rules: []*mgmtpb.RouteFirewallRule{{SourceRanges: []string{"fd00:1234::7/128"}, Action: mgmtpb.RuleAction_ACCEPT, Destination: "2001:db8:50::/64",
				Protocol: mgmtpb.RuleProtocol_TCP, PortInfo: &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Port{Port: 443}}}},
			want: serving{Routes: []forward.Route{{Network: pfx("2001:db8:50::/64")}}, Routing: acl.Routing{Networks: []netip.Prefix{pfx("2001:db8:50::/64")}, Rules: []acl.RouteRule{
				{Sources: []netip.Prefix{pfx("fd00:1234::7/128")}, Dests: []netip.Prefix{pfx("2001:db8:50::/64")}, Accept: true, Proto: acl.ProtoTCP, PortLo: 443, PortHi: 443},
			}}}},
		{name: "domain route over a dual-stack overlay: both families", overlay6: true,
			routes: []*mgmtpb.Route{{ID: "d1", NetworkType: netTypeDomain, Domains: []string{"example.com"}, Peer: self.String(), Masquerade: true}},
			rules:  []*mgmtpb.RouteFirewallRule{{SourceRanges: []string{"100.70.0.0/16"}, Action: mgmtpb.RuleAction_ACCEPT, IsDynamic: true, Domains: []string{"example.com"}, Protocol: mgmtpb.RuleProtocol_ALL}},
			want: serving{Routes: []forward.Route{{Network: any4, Masquerade: true}, {Network: any6, Masquerade: true}},
				Routing: acl.Routing{Networks: []netip.Prefix{any4, any6}, Rules: []acl.RouteRule{{Sources: []netip.Prefix{pfx("100.70.0.0/16")}, Dests: []netip.Prefix{any4, any6}, Accept: true}}}}},
		{name: "domain route and dynamic rule: the overlay's family only",
			routes: []*mgmtpb.Route{{ID: "d1", NetworkType: netTypeDomain, Domains: []string{"example.com"}, Peer: self.String(), Masquerade: true}},
			rules:  []*mgmtpb.RouteFirewallRule{{SourceRanges: []string{"100.70.0.0/16"}, Action: mgmtpb.RuleAction_ACCEPT, IsDynamic: true, Domains: []string{"example.com"}, Protocol: mgmtpb.RuleProtocol_ALL}},
			want: serving{Routes: []forward.Route{{Network: any4, Masquerade: true}},
				Routing: acl.Routing{Networks: []netip.Prefix{any4}, Rules: []acl.RouteRule{{Sources: []netip.Prefix{pfx("100.70.0.0/16")}, Dests: []netip.Prefix{any4}, Accept: true}}}}},
		{name: "domain route without rules (legacy): an open exit, warned",
			routes: []*mgmtpb.Route{{ID: "d1", NetworkType: netTypeDomain, Domains: []string{"example.com"}, Peer: self.String()}},
			want:   serving{Routes: []forward.Route{{Network: any4}}, Routing: acl.Routing{Networks: []netip.Prefix{any4}, AllowAll: true}},
			warns:  1},
		{name: "bad route and bad rules are skipped with warnings",
			routes: []*mgmtpb.Route{{ID: "bad", Network: "nonsense", NetworkType: netTypeIPv4, Peer: self.String()}, {ID: "r1", Network: "192.168.50.0/24", Peer: self.String()}},
			rules: []*mgmtpb.RouteFirewallRule{
				{Destination: "x", Protocol: mgmtpb.RuleProtocol_ALL},
				{Destination: "192.168.50.0/24", Protocol: mgmtpb.RuleProtocol_TCP, PortInfo: &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Range_{Range: &mgmtpb.PortInfo_Range{Start: 90, End: 80}}}},
				{Destination: "192.168.50.0/24", Protocol: mgmtpb.RuleProtocol_CUSTOM},
				{SourceRanges: []string{"bad"}, Destination: "192.168.50.0/24", Protocol: mgmtpb.RuleProtocol_ALL},
			},
			// Rules were sent and none survived: still default deny.
			want:  serving{Routes: []forward.Route{{Network: lan}}, Routing: acl.Routing{Networks: []netip.Prefix{lan}}},
			warns: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, warns := servingFromMap(self, tc.routes, tc.rules, tc.empty, tc.overlay6, nil)
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("serving (-want +got):\n%s", d)
			}
			if len(warns) != tc.warns {
				t.Errorf("warnings: got %q, want %d", warns, tc.warns)
			}
		})
	}
}

func mustKey(t *testing.T) key.Public {
	t.Helper()
	k, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	return k.Public()
}

// fakeFirewall records what the engine asks of the firewall.
type fakeFirewall struct {
	overlay netip.Prefix
	routing []acl.Routing
}

func (f *fakeFirewall) SetRules([]acl.Rule, bool)                {}
func (f *fakeFirewall) SetOverlay(_ netip.Addr, ov netip.Prefix) { f.overlay = ov }
func (f *fakeFirewall) SetRouting(r acl.Routing)                 { f.routing = append(f.routing, r) }
func (f *fakeFirewall) close()                                   {}

type fakeNAT struct {
	err                error
	overlays, networks []netip.Prefix
}

func (n *fakeNAT) Set(overlays, networks []netip.Prefix) error {
	n.overlays, n.networks = overlays, networks
	return n.err
}
func (n *fakeNAT) Close() error { return nil }

// TestServerRoutesApply: the firewall learns the overlay, gets the route
// rules only when they change, and none when forwarding fails.
func TestServerRoutesApply(t *testing.T) {
	proc := t.TempDir()
	for _, k := range []string{"sys/net/ipv4/ip_forward", "sys/net/ipv6/conf/all/forwarding"} {
		if err := os.MkdirAll(filepath.Join(proc, filepath.Dir(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, k), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nat := &fakeNAT{}
	fwd, err := forward.New(forward.Options{Interface: "wt9", ProcRoot: proc, NAT: nat, RemoveTable: func(string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	fw := &fakeFirewall{}
	s := &serverRoutes{log: slog.New(slog.DiscardHandler), fw: fw, fwd: fwd}
	self := mustKey(t)
	addr := netip.MustParsePrefix("100.70.0.1/16")
	nm := &mgmtpb.NetworkMap{Routes: []*mgmtpb.Route{{ID: "r1", Network: "192.168.50.0/24", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true}}}
	s.apply(self, addr, nm)
	s.apply(self, addr, nm)
	if fw.overlay != netip.MustParsePrefix("100.70.0.0/16") {
		t.Errorf("overlay %v", fw.overlay)
	}
	if len(fw.routing) != 1 || !fw.routing[0].AllowAll {
		t.Fatalf("routing applied %d times (%+v), want once with the legacy allow-all", len(fw.routing), fw.routing)
	}
	if b, _ := os.ReadFile(filepath.Join(proc, "sys/net/ipv4/ip_forward")); string(b) != "1\n" {
		t.Errorf("ip_forward %q", b)
	}
	// Masquerade cannot be installed: routed traffic is refused.
	nat.err = errors.New("no nf_tables")
	nm.RoutesFirewallRulesIsEmpty = true
	s.apply(self, addr, nm)
	if last := fw.routing[len(fw.routing)-1]; len(last.Networks) != 0 {
		t.Errorf("after a forwarding failure the filter routes %v", last.Networks)
	}
	s.close()
	if b, _ := os.ReadFile(filepath.Join(proc, "sys/net/ipv4/ip_forward")); string(b) != "0\n" {
		t.Errorf("ip_forward after close %q", b)
	}
}

// TestServerRoutesNoIPv6Forwarding: a domain route and an IPv6 exit node
// over the IPv4 overlay leave IPv6 forwarding off (on, it would make
// interfaces with accept_ra=1 drop their SLAAC default route); the
// problems are logged once, not on every map.
func TestServerRoutesNoIPv6Forwarding(t *testing.T) {
	proc := t.TempDir()
	for _, k := range []string{"sys/net/ipv4/ip_forward", "sys/net/ipv6/conf/all/forwarding"} {
		if err := os.MkdirAll(filepath.Join(proc, filepath.Dir(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, k), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fwd, err := forward.New(forward.Options{Interface: "wt9", ProcRoot: proc, NAT: &fakeNAT{}, RemoveTable: func(string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	s := &serverRoutes{log: slog.New(slog.NewTextHandler(&logs, nil)), fw: &fakeFirewall{}, fwd: fwd}
	defer s.close()
	self := mustKey(t)
	nm := &mgmtpb.NetworkMap{Routes: []*mgmtpb.Route{
		{ID: "d1", NetworkType: netTypeDomain, Domains: []string{"example.com"}, Peer: self.String(), Masquerade: true},
		{ID: "e6", Network: "::/0", NetworkType: netTypeIPv6, Peer: self.String(), Masquerade: true},
	}}
	for i := 0; i < 3; i++ {
		s.apply(self, netip.MustParsePrefix("100.70.0.1/16"), nm)
	}
	if b, _ := os.ReadFile(filepath.Join(proc, "sys/net/ipv4/ip_forward")); string(b) != "1\n" {
		t.Errorf("ip_forward %q, want 1", b)
	}
	if b, _ := os.ReadFile(filepath.Join(proc, "sys/net/ipv6/conf/all/forwarding")); string(b) != "0\n" {
		t.Errorf("IPv6 forwarding %q, want it left off", b)
	}
	if n := strings.Count(logs.String(), "IPv6 route not served"); n != 1 {
		t.Errorf("IPv6 route warned %d times over 3 maps, want once:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "open exit"); n != 1 {
		t.Errorf("legacy domain route warned %d times over 3 maps, want once:\n%s", n, logs.String())
	}
}

// TestServerRoutesIPv6ExitNode: with an IPv6 overlay address the mirrored
// ::/0 is served: IPv6 forwarding on, both defaults masqueraded, each from
// the overlay of its family, both in the filter; when the IPv6 address
// goes (--disable-ipv6, or the peer left the IPv6 groups) IPv6 is served
// no more and its forwarding goes back off.
func TestServerRoutesIPv6ExitNode(t *testing.T) {
	proc := t.TempDir()
	for _, k := range []string{"sys/net/ipv4/ip_forward", "sys/net/ipv6/conf/all/forwarding"} {
		if err := os.MkdirAll(filepath.Join(proc, filepath.Dir(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, k), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nat := &fakeNAT{}
	fwd, err := forward.New(forward.Options{Interface: "wt9", ProcRoot: proc, NAT: nat, RemoveTable: func(string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	fw := &fakeFirewall{}
	s := &serverRoutes{log: slog.New(slog.DiscardHandler), fw: fw, fwd: fwd}
	defer s.close()
	self := mustKey(t)
	pfx := netip.MustParsePrefix
	nm := &mgmtpb.NetworkMap{Routes: []*mgmtpb.Route{
		{ID: "e4", NetID: "exit", Network: "0.0.0.0/0", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true},
		{ID: "e4-v6-default", NetID: "exit-v6", Network: "::/0", NetworkType: netTypeIPv6, Peer: self.String(), Masquerade: true},
	}, RoutesFirewallRulesIsEmpty: true}
	v6 := func() string {
		b, _ := os.ReadFile(filepath.Join(proc, "sys/net/ipv6/conf/all/forwarding"))
		return strings.TrimSpace(string(b))
	}
	s.setOverlay6(pfx("fd00:1234::1/64"))
	s.apply(self, pfx("100.70.0.1/16"), nm)
	if v6() != "1" {
		t.Errorf("IPv6 forwarding %q while serving ::/0, want 1", v6())
	}
	if d := cmp.Diff([]netip.Prefix{pfx("100.70.0.0/16"), pfx("fd00:1234::/64")}, nat.overlays, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("masquerade sources (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]netip.Prefix{pfx("0.0.0.0/0"), pfx("::/0")}, nat.networks, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("masqueraded networks (-want +got):\n%s", d)
	}
	if last := fw.routing[len(fw.routing)-1]; len(last.Networks) != 2 {
		t.Errorf("filter routes %v, want both defaults", last.Networks)
	}
	s.setOverlay6(netip.Prefix{})
	s.apply(self, pfx("100.70.0.1/16"), nm)
	if v6() != "0" {
		t.Errorf("IPv6 forwarding %q without an IPv6 overlay address, want 0", v6())
	}
	if last := fw.routing[len(fw.routing)-1]; len(last.Networks) != 1 || last.Networks[0] != pfx("0.0.0.0/0") {
		t.Errorf("filter routes %v without an IPv6 overlay address, want 0.0.0.0/0 only", last.Networks)
	}
}

// TestServerRoutesOverlayMoves: the masquerade follows the overlays when
// the account's ranges move, though the map's routes stay the same.
func TestServerRoutesOverlayMoves(t *testing.T) {
	proc := t.TempDir()
	for _, k := range []string{"sys/net/ipv4/ip_forward", "sys/net/ipv6/conf/all/forwarding"} {
		if err := os.MkdirAll(filepath.Join(proc, filepath.Dir(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, k), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	nat := &fakeNAT{}
	fwd, err := forward.New(forward.Options{Interface: "wt9", ProcRoot: proc, NAT: nat, RemoveTable: func(string) error { return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer fwd.Close()
	s := &serverRoutes{log: slog.New(slog.DiscardHandler), fw: &fakeFirewall{}, fwd: fwd}
	self := mustKey(t)
	nm := &mgmtpb.NetworkMap{Routes: []*mgmtpb.Route{{ID: "r1", Network: "192.168.50.0/24", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true}}}
	s.setOverlay6(netip.MustParsePrefix("fd00:1::5/64"))
	s.apply(self, netip.MustParsePrefix("100.70.0.1/16"), nm)
	want := []netip.Prefix{netip.MustParsePrefix("100.70.0.0/16"), netip.MustParsePrefix("fd00:1::/64")}
	if !slices.Equal(want, nat.overlays) {
		t.Fatalf("NAT overlays %v, want %v", nat.overlays, want)
	}
	// The IPv6 range moves.
	s.setOverlay6(netip.MustParsePrefix("fd00:2::5/64"))
	s.apply(self, netip.MustParsePrefix("100.70.0.1/16"), nm)
	want[1] = netip.MustParsePrefix("fd00:2::/64")
	if !slices.Equal(want, nat.overlays) {
		t.Errorf("after the IPv6 range moved, NAT overlays %v, want %v", nat.overlays, want)
	}
	// The IPv4 range moves.
	s.apply(self, netip.MustParsePrefix("100.80.0.1/16"), nm)
	want[0] = netip.MustParsePrefix("100.80.0.0/16")
	if !slices.Equal(want, nat.overlays) {
		t.Errorf("after the IPv4 range moved, NAT overlays %v, want %v", nat.overlays, want)
	}
}
