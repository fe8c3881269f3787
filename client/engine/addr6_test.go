package engine

import (
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/wg"
	"github.com/wiremesh/wiremesh/internal/compactip"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestMetaIPv6: the login and sync meta announce the IPv6 overlay unless
// --disable-ipv6, which also sets the disableIPv6 flag.
func TestMetaIPv6(t *testing.T) {
	for _, disable := range []bool{false, true} {
		m := Options{Hostname: "h", Version: "0.77.1", DisableIPv6: disable}.meta()
		has := slices.Contains(m.GetCapabilities(), mgmtpb.PeerCapability_PeerCapabilityIPv6Overlay)
		if has == disable {
			t.Errorf("disable=%v: capabilities %v", disable, m.GetCapabilities())
		}
		if !slices.Contains(m.GetCapabilities(), mgmtpb.PeerCapability_PeerCapabilitySourcePrefixes) {
			t.Errorf("disable=%v: SourcePrefixes missing from %v", disable, m.GetCapabilities())
		}
		if m.GetFlags().GetDisableIPv6() != disable {
			t.Errorf("disable=%v: flag disableIPv6=%v", disable, m.GetFlags().GetDisableIPv6())
		}
	}
}

// TestRemotePeerIPv6: a remote peer's /128 goes into its allowed IPs and
// the status, beside its IPv4 address.
func TestRemotePeerIPv6(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name           string
		allowed        []string
		want           []netip.Prefix
		wantV4, wantV6 string
	}{
		{"v4 only", []string{"100.77.0.6/32"}, []netip.Prefix{pfx("100.77.0.6/32")}, "100.77.0.6", ""},
		{"v4 and v6", []string{"100.77.0.6/32", "fd00:1:2:3::6/128"}, []netip.Prefix{pfx("100.77.0.6/32"), pfx("fd00:1:2:3::6/128")}, "100.77.0.6", "fd00:1:2:3::6"},
		{"v6 first", []string{"fd00:1:2:3::6/128", "100.77.0.6/32"}, []netip.Prefix{pfx("fd00:1:2:3::6/128"), pfx("100.77.0.6/32")}, "100.77.0.6", "fd00:1:2:3::6"},
		{"junk skipped", []string{"nonsense", "::ffff:1.2.3.4/128", "fe80::1%eth0/128", "100.77.0.6/32"}, []netip.Prefix{pfx("100.77.0.6/32")}, "100.77.0.6", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := parsePrefixes(tt.allowed)
			if d := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("allowed IPs (-want +got):\n%s", d)
			}
			v4, v6 := peerIPs(got)
			if v4 != tt.wantV4 || v6 != tt.wantV6 {
				t.Errorf("status IPs = %q, %q; want %q, %q", v4, v6, tt.wantV4, tt.wantV6)
			}
		})
	}
}

// TestFirewallRuleV6: the IPv6 twins of firewall rules (17-byte source
// prefixes, or an IPv6 PeerIP) name the peer's IPv6 address.
func TestFirewallRuleV6(t *testing.T) {
	peer6 := netip.MustParseAddr("fd00:1:2:3::6")
	src := func(p string) [][]byte { return [][]byte{compactip.Prefix(netip.MustParsePrefix(p))} }
	in := func(fr *mgmtpb.FirewallRule) *mgmtpb.FirewallRule {
		fr.Direction, fr.Action = mgmtpb.RuleDirection_IN, mgmtpb.RuleAction_ACCEPT
		return fr
	}
	tests := []struct {
		name   string
		fr     *mgmtpb.FirewallRule
		want   acl.Rule
		wantOK bool
	}{
		{"v6 source prefix", in(&mgmtpb.FirewallRule{PeerIP: "fd00:1:2:3::6", SourcePrefixes: src("fd00:1:2:3::6/128"), Protocol: mgmtpb.RuleProtocol_ICMP}),
			acl.Rule{Peer: peer6, Inbound: true, Accept: true, Proto: acl.ProtoICMP}, true},
		{"v6 PeerIP only", in(&mgmtpb.FirewallRule{PeerIP: "fd00:1:2:3::6", Protocol: mgmtpb.RuleProtocol_TCP, PortInfo: &mgmtpb.PortInfo{PortSelection: &mgmtpb.PortInfo_Port{Port: 80}}}),
			acl.Rule{Peer: peer6, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80}, true},
		{"v6 any", in(&mgmtpb.FirewallRule{PeerIP: "::", SourcePrefixes: src("::/0"), Protocol: mgmtpb.RuleProtocol_ALL}),
			acl.Rule{Inbound: true, Accept: true, Proto: acl.ProtoAny}, true},
		{"v4 still", in(&mgmtpb.FirewallRule{PeerIP: "100.77.0.6", SourcePrefixes: src("100.77.0.6/32"), Protocol: mgmtpb.RuleProtocol_UDP}),
			acl.Rule{Peer: netip.MustParseAddr("100.77.0.6"), Inbound: true, Accept: true, Proto: acl.ProtoUDP}, true},
		{"v4-mapped /128 is the IPv4 peer", in(&mgmtpb.FirewallRule{SourcePrefixes: [][]byte{append(netip.MustParseAddr("::ffff:100.77.0.6").AsSlice(), 128)}, Protocol: mgmtpb.RuleProtocol_TCP}),
			acl.Rule{Peer: netip.MustParseAddr("100.77.0.6"), Inbound: true, Accept: true, Proto: acl.ProtoTCP}, true},
		{"v6 network prefix", in(&mgmtpb.FirewallRule{SourcePrefixes: src("fd00:1:2:3::/64"), Protocol: mgmtpb.RuleProtocol_ALL}), acl.Rule{}, false},
		{"bad length byte", in(&mgmtpb.FirewallRule{SourcePrefixes: [][]byte{append(peer6.AsSlice(), 200)}, Protocol: mgmtpb.RuleProtocol_ALL}), acl.Rule{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := firewallRule(tt.fr)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if ok && got != tt.want {
				t.Fatalf("rule = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// fakeDev6 is an interface that records its IPv6 address (or refuses).
type fakeDev6 struct {
	addr6 netip.Prefix
	err   error
	calls int
}

func (d *fakeDev6) Name() string                                { return "wt-test" }
func (d *fakeDev6) Port() int                                   { return 0 }
func (d *fakeDev6) Bind() *wg.Bind                              { return nil }
func (d *fakeDev6) SetAddress(netip.Prefix, int) error          { return nil }
func (d *fakeDev6) SetPeer(wg.Peer) error                       { return nil }
func (d *fakeDev6) RemovePeer(key.Public) error                 { return nil }
func (d *fakeDev6) PeerStats() (map[key.Public]wg.Stats, error) { return nil, nil }
func (d *fakeDev6) Close()                                      {}
func (d *fakeDev6) SetAddress6(p netip.Prefix) error {
	d.calls++
	if d.err != nil && p.IsValid() {
		return d.err
	}
	d.addr6 = p
	return nil
}

// fakeFW6 records what the firewall was told about the IPv6 overlay.
type fakeFW6 struct {
	local   netip.Addr
	overlay netip.Prefix
}

func (f *fakeFW6) SetRules([]acl.Rule, bool)                {}
func (f *fakeFW6) SetOverlay(netip.Addr, netip.Prefix)      {}
func (f *fakeFW6) SetRouting(acl.Routing)                   {}
func (f *fakeFW6) close()                                   {}
func (f *fakeFW6) SetOverlay6(l netip.Addr, o netip.Prefix) { f.local, f.overlay = l, o }

// TestSetAddress6: management's address_v6 reaches the interface and the
// firewall, moves in place, goes away; --disable-ipv6 refuses one an old
// server sends anyway; an interface that refuses it leaves the peer on
// IPv4 with the reason in the status.
func TestSetAddress6(t *testing.T) {
	first, second := netip.MustParsePrefix("fd00:1:2:3::5/64"), netip.MustParsePrefix("fd00:1:2:3::9/64")
	newEngine := func(o Options, d *fakeDev6) (*Engine, *fakeFW6) {
		fw := &fakeFW6{}
		return &Engine{o: o, log: slog.New(slog.DiscardHandler), dev: d, filter: fw}, fw
	}
	d := &fakeDev6{}
	e, fw := newEngine(Options{}, d)
	if got := e.ipv6Mode(); !strings.HasPrefix(got, "no address assigned") {
		t.Errorf("mode before an address: %q", got)
	}
	for _, p := range []netip.Prefix{first, second, {}} {
		e.setAddress6(p)
		wantLocal := netip.Addr{}
		if p.IsValid() {
			wantLocal = p.Addr()
		}
		if d.addr6 != p || e.addr6 != p || fw.local != wantLocal || fw.overlay != p.Masked() {
			t.Fatalf("after %v: device %v, engine %v, firewall %v %v", p, d.addr6, e.addr6, fw.local, fw.overlay)
		}
		if p.IsValid() && e.ipv6Mode() != "on" {
			t.Errorf("after %v: mode %q", p, e.ipv6Mode())
		}
	}

	d = &fakeDev6{}
	e, fw = newEngine(Options{DisableIPv6: true}, d)
	e.setAddress6(first)
	if d.addr6.IsValid() || e.addr6.IsValid() || fw.overlay.IsValid() || e.ipv6Mode() != "disabled (--disable-ipv6)" {
		t.Errorf("--disable-ipv6: device %v, engine %v, firewall %v, mode %q", d.addr6, e.addr6, fw.overlay, e.ipv6Mode())
	}

	d = &fakeDev6{err: errors.New("permission denied (IPv6 is disabled on this host)")}
	e, fw = newEngine(Options{}, d)
	e.setAddress6(first)
	if d.addr6.IsValid() || e.addr6.IsValid() || fw.overlay.IsValid() || !strings.Contains(e.ipv6Mode(), "IPv6 is disabled on this host") {
		t.Errorf("refused: device %v, engine %v, firewall %v, mode %q", d.addr6, e.addr6, fw.overlay, e.ipv6Mode())
	}
}

// TestSyncAddress6RefusedOnce: an address the interface refused is not
// tried again on every map that still carries it, only when the map's
// address changes.
func TestSyncAddress6RefusedOnce(t *testing.T) {
	first, second := netip.MustParsePrefix("fd00:1:2:3::5/64"), netip.MustParsePrefix("fd00:1:2:3::9/64")
	d := &fakeDev6{err: errors.New("permission denied")}
	e := &Engine{log: slog.New(slog.DiscardHandler), dev: d, filter: &fakeFW6{}}
	e.syncAddress6(first)
	calls := d.calls
	if calls == 0 || e.addr6.IsValid() {
		t.Fatalf("first map: %d calls, address %v", calls, e.addr6)
	}
	for range 3 {
		e.syncAddress6(first)
	}
	if d.calls != calls {
		t.Errorf("the same refused address was tried again: %d calls, want %d", d.calls, calls)
	}
	if !strings.Contains(e.ipv6Mode(), "permission denied") {
		t.Errorf("mode %q lost the reason", e.ipv6Mode())
	}
	d.err = nil
	e.syncAddress6(second)
	if e.addr6 != second {
		t.Errorf("a new address after a refused one: %v, want %v", e.addr6, second)
	}
	e.syncAddress6(netip.Prefix{})
	if e.addr6.IsValid() || d.addr6.IsValid() {
		t.Errorf("address removed: engine %v, device %v", e.addr6, d.addr6)
	}
}
