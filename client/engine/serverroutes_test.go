package engine

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
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

type fakeNAT struct{ err error }

func (n *fakeNAT) Set(netip.Prefix, []netip.Prefix) error { return n.err }
func (n *fakeNAT) Close() error                           { return nil }

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
