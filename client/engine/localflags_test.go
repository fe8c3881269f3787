package engine

import (
	"context"
	"encoding/binary"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/forward"
	"github.com/wiremesh/wiremesh/client/routes"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

func TestSubtractPrefixes(t *testing.T) {
	pfx := netip.MustParsePrefix
	tests := []struct {
		name  string
		p     netip.Prefix
		holes []netip.Prefix
		want  []netip.Prefix
	}{
		{"no holes", pfx("192.168.1.0/24"), nil, []netip.Prefix{pfx("192.168.1.0/24")}},
		{"disjoint hole", pfx("192.168.1.0/24"), []netip.Prefix{pfx("10.0.0.0/8")}, []netip.Prefix{pfx("192.168.1.0/24")}},
		{"hole covers all", pfx("192.168.1.0/24"), []netip.Prefix{pfx("192.168.0.0/16")}, nil},
		{"equal hole", pfx("192.168.1.0/24"), []netip.Prefix{pfx("192.168.1.0/24")}, nil},
		{"one host out", pfx("192.168.1.0/30"), []netip.Prefix{pfx("192.168.1.2/32")},
			[]netip.Prefix{pfx("192.168.1.0/31"), pfx("192.168.1.3/32")}},
		{"upper half out", pfx("10.0.0.0/8"), []netip.Prefix{pfx("10.128.0.0/9")}, []netip.Prefix{pfx("10.0.0.0/9")}},
		{"IPv6", pfx("fd00::/63"), []netip.Prefix{pfx("fd00::/64")}, []netip.Prefix{pfx("fd00:0:0:1::/64")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if d := cmp.Diff(tc.want, subtractPrefixes(tc.p, tc.holes), cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
				t.Errorf("subtract (-want +got):\n%s", d)
			}
		})
	}
}

func TestWithLANBlocked(t *testing.T) {
	pfx := netip.MustParsePrefix
	overlay := pfx("100.70.0.1/16")
	home, office := pfx("192.168.1.0/24"), pfx("10.10.0.0/16")
	any4 := pfx("0.0.0.0/0")
	lans := []netip.Prefix{home, office, pfx("100.70.0.0/16"), pfx("fd00::/64")}
	accept := acl.RouteRule{Sources: []netip.Prefix{pfx("100.70.0.2/32")}, Dests: []netip.Prefix{any4}, Accept: true}
	tests := []struct {
		name string
		in   acl.Routing
		want acl.Routing
	}{
		{name: "nothing served", in: acl.Routing{}, want: acl.Routing{}},
		{name: "exit node: both LANs dropped first, the overlay never",
			in: acl.Routing{Networks: []netip.Prefix{any4}, Rules: []acl.RouteRule{accept}},
			want: acl.Routing{Networks: []netip.Prefix{any4}, Rules: []acl.RouteRule{
				{Dests: []netip.Prefix{office, home}}, accept}}},
		{name: "legacy allow-all becomes an explicit accept after the drop",
			in: acl.Routing{Networks: []netip.Prefix{any4}, AllowAll: true},
			want: acl.Routing{Networks: []netip.Prefix{any4}, Rules: []acl.RouteRule{
				{Dests: []netip.Prefix{office, home}}, {Dests: []netip.Prefix{any4}, Accept: true}}}},
		{name: "a route naming the LAN keeps it reachable",
			in:   acl.Routing{Networks: []netip.Prefix{any4, home}, Rules: []acl.RouteRule{accept}},
			want: acl.Routing{Networks: []netip.Prefix{any4, home}, Rules: []acl.RouteRule{{Dests: []netip.Prefix{office}}, accept}}},
		{name: "a route to one LAN host opens that host only",
			in: acl.Routing{Networks: []netip.Prefix{pfx("192.168.1.0/25"), pfx("192.168.1.200/32")}, Rules: []acl.RouteRule{accept}},
			want: acl.Routing{Networks: []netip.Prefix{pfx("192.168.1.0/25"), pfx("192.168.1.200/32")}, Rules: []acl.RouteRule{
				{Dests: []netip.Prefix{pfx("192.168.1.128/26"), pfx("192.168.1.192/29"), pfx("192.168.1.201/32"), pfx("192.168.1.202/31"),
					pfx("192.168.1.204/30"), pfx("192.168.1.208/28"), pfx("192.168.1.224/27")}}, accept}}},
		{name: "a split default route (two /1) opens no LAN",
			in: acl.Routing{Networks: []netip.Prefix{pfx("0.0.0.0/1"), pfx("128.0.0.0/1")}, Rules: []acl.RouteRule{accept}},
			want: acl.Routing{Networks: []netip.Prefix{pfx("0.0.0.0/1"), pfx("128.0.0.0/1")}, Rules: []acl.RouteRule{
				{Dests: []netip.Prefix{office, home}}, accept}}},
		{name: "a route wider than the LAN does not open it",
			in: acl.Routing{Networks: []netip.Prefix{pfx("192.168.0.0/16")}, Rules: []acl.RouteRule{accept}},
			want: acl.Routing{Networks: []netip.Prefix{pfx("192.168.0.0/16")}, Rules: []acl.RouteRule{
				{Dests: []netip.Prefix{home}}, accept}}},
		{name: "a /25 inside the LAN opens that /25 only, even beside a wider route",
			in: acl.Routing{Networks: []netip.Prefix{pfx("192.168.0.0/16"), pfx("192.168.1.0/25")}, Rules: []acl.RouteRule{accept}},
			want: acl.Routing{Networks: []netip.Prefix{pfx("192.168.0.0/16"), pfx("192.168.1.0/25")}, Rules: []acl.RouteRule{
				{Dests: []netip.Prefix{pfx("192.168.1.128/25")}}, accept}}},
		{name: "a route elsewhere needs no drop",
			in:   acl.Routing{Networks: []netip.Prefix{pfx("172.16.0.0/12")}, AllowAll: true},
			want: acl.Routing{Networks: []netip.Prefix{pfx("172.16.0.0/12")}, AllowAll: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := withLANBlocked(tc.in, lans, overlay)
			if d := cmp.Diff(tc.want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b }), cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
				t.Errorf("routing (-want +got):\n%s", d)
			}
		})
	}
}

// TestWithLANBlockedIPv6: an IPv6 exit node (the mirrored ::/0) blocks
// the host's IPv6 LAN as 0.0.0.0/0 blocks the IPv4 one, and never the
// IPv6 overlay (the interface's own /64 is among the host's networks).
func TestWithLANBlockedIPv6(t *testing.T) {
	pfx := netip.MustParsePrefix
	home, home6, overlay6 := pfx("192.168.1.0/24"), pfx("2001:db8:200::/64"), pfx("fd00:1234::/64")
	lans := []netip.Prefix{home, home6, pfx("100.70.0.0/16"), overlay6}
	any4, any6 := pfx("0.0.0.0/0"), pfx("::/0")
	in := acl.Routing{Networks: []netip.Prefix{any4, any6}, AllowAll: true}
	want := acl.Routing{Networks: []netip.Prefix{any4, any6}, Rules: []acl.RouteRule{
		{Dests: []netip.Prefix{home, home6}}, {Dests: []netip.Prefix{any4, any6}, Accept: true}}}
	got := withLANBlocked(in, lans, pfx("100.70.0.1/16"), pfx("fd00:1234::1/64"))
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); d != "" {
		t.Errorf("routing (-want +got):\n%s", d)
	}
}

// synTo is an IPv4 TCP SYN from src to dst port 80.
func synTo(src, dst netip.Addr) []byte {
	b := make([]byte, 40)
	b[0], b[9] = 0x45, acl.ProtoTCP
	binary.BigEndian.PutUint16(b[2:4], 40)
	s, d := src.As4(), dst.As4()
	copy(b[12:16], s[:])
	copy(b[16:20], d[:])
	binary.BigEndian.PutUint16(b[20:22], 40000)
	binary.BigEndian.PutUint16(b[22:24], 80)
	b[32], b[33] = 0x50, 0x02
	return b
}

func fakeProc(t *testing.T) string {
	t.Helper()
	proc := t.TempDir()
	for _, k := range []string{"sys/net/ipv4/ip_forward", "sys/net/ipv6/conf/all/forwarding"} {
		if err := os.MkdirAll(filepath.Join(proc, filepath.Dir(k)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(proc, k), []byte("0\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return proc
}

// TestServerRouteFlags: what --disable-server-routes and
// --block-lan-access make of an exit node's map, decided by the real
// userspace filter.
func TestServerRouteFlags(t *testing.T) {
	self := mustKey(t)
	addr := netip.MustParsePrefix("100.70.0.1/16")
	peerAddr := netip.MustParseAddr("100.70.0.2")
	lanHost, internet, named := netip.MustParseAddr("192.168.1.5"), netip.MustParseAddr("8.8.8.8"), netip.MustParseAddr("10.10.0.5")
	exit := &mgmtpb.Route{ID: "exit", NetID: "exit", Network: "0.0.0.0/0", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true}
	office := &mgmtpb.Route{ID: "office", NetID: "office", Network: "10.10.0.0/16", NetworkType: netTypeIPv4, Peer: self.String(), Masquerade: true}
	tests := []struct {
		name               string
		disabled, blockLAN bool
		lanErr             error
		want               map[netip.Addr]bool // destination -> forwarded
		forwarding         string
	}{
		{name: "default: everything routed", want: map[netip.Addr]bool{lanHost: true, internet: true, named: true}, forwarding: "1\n"},
		{name: "disable server routes: nothing, forwarding untouched", disabled: true,
			want: map[netip.Addr]bool{lanHost: false, internet: false, named: false}, forwarding: "0\n"},
		{name: "block LAN: the LAN no, a named LAN and the internet yes", blockLAN: true,
			want: map[netip.Addr]bool{lanHost: false, internet: true, named: true}, forwarding: "1\n"},
		{name: "block LAN, host networks unknown: refuse all", blockLAN: true, lanErr: errors.New("netlink down"),
			want: map[netip.Addr]bool{lanHost: false, internet: false, named: false}, forwarding: "0\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			proc := fakeProc(t)
			filter := acl.NewWithOptions(acl.Options{HostAddrs: func() ([]netip.Addr, error) { return []netip.Addr{addr.Addr()}, nil }})
			filter.SetRules(nil, true)
			fw := userspaceFirewall{filter}
			log := slog.New(slog.DiscardHandler)
			var s *serverRoutes
			if tc.disabled {
				s = newServerRoutes(Options{Log: log, DisableServerRoutes: true, BlockLANAccess: tc.blockLAN, StateDir: t.TempDir()}, "wt9", fw)
				if s.fwd != nil {
					t.Fatal("server routes disabled, yet the host's forwarding was taken over")
				}
			} else {
				// The test's own /proc and NAT, not the host's.
				fwd, err := forward.New(forward.Options{Interface: "wt9", ProcRoot: proc, NAT: &fakeNAT{}, RemoveTable: func(string) error { return nil }})
				if err != nil {
					t.Fatal(err)
				}
				s = &serverRoutes{log: log, fw: fw, fwd: fwd, blockLAN: tc.blockLAN}
			}
			defer s.close()
			s.lan = func() ([]netip.Prefix, error) {
				return []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24"), netip.MustParsePrefix("10.10.0.0/16"), addr.Masked()}, tc.lanErr
			}
			s.apply(self, addr, &mgmtpb.NetworkMap{Routes: []*mgmtpb.Route{exit, office}})
			for dst, want := range tc.want {
				if got := filter.Inbound(synTo(peerAddr, dst)); got != want {
					t.Errorf("SYN to %s forwarded=%v, want %v", dst, got, want)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(proc, "sys/net/ipv4/ip_forward")); string(b) != tc.forwarding {
				t.Errorf("ip_forward %q, want %q", b, tc.forwarding)
			}
		})
	}
}

func TestLocalFlags(t *testing.T) {
	got := Options{DisableClientRoutes: true, BlockLANAccess: true, DisableDNS: true}.localFlags()
	want := &mgmtpb.Flags{DisableClientRoutes: true, BlockLANAccess: true, DisableDNS: true}
	if got.GetDisableClientRoutes() != want.DisableClientRoutes || got.GetDisableServerRoutes() || got.GetBlockLANAccess() != want.BlockLANAccess || got.GetDisableDNS() != want.DisableDNS {
		t.Errorf("flags %v, want %v", got, want)
	}
}

// recordSystem counts what the route client asks of the OS.
type recordSystem struct{ applied int }

func (r *recordSystem) Apply(context.Context, []netip.Prefix, []netip.Addr) error {
	r.applied++
	return nil
}
func (*recordSystem) Close(context.Context) error { return nil }

// TestDisableClientRoutes: with --disable-client-routes the map's
// networks are still listed, yet nothing reaches the OS and no routing
// peer is chosen.
func TestDisableClientRoutes(t *testing.T) {
	router := mustKey(t)
	nm := &mgmtpb.NetworkMap{Routes: []*mgmtpb.Route{
		{ID: "r1", NetID: "office", Network: "10.10.0.0/16", NetworkType: netTypeIPv4, Peer: router.String()},
	}}
	for _, disabled := range []bool{false, true} {
		sys := &recordSystem{}
		e := &Engine{o: Options{DisableClientRoutes: disabled, Private: mustPrivate(t)}, log: slog.New(slog.DiscardHandler),
			addr: netip.MustParsePrefix("100.70.0.1/16"), peers: map[key.Public]*remote{}, resolveNow: make(chan struct{}, 1),
			routes: routes.NewManager(routes.Config{System: sys})}
		e.mu.Lock()
		e.applyRoutes(nm)
		e.mu.Unlock()
		nets := e.Networks()
		if len(nets) != 1 || nets[0].ID != "office" || nets[0].Range != "10.10.0.0/16" || !nets[0].Selected || nets[0].Chosen != "" {
			t.Errorf("disabled=%v: networks %+v, want office listed and selected, no router chosen", disabled, nets)
		}
		if (sys.applied > 0) == disabled {
			t.Errorf("disabled=%v: the OS routes were applied %d times", disabled, sys.applied)
		}
	}
}

func mustPrivate(t *testing.T) key.Private {
	t.Helper()
	k, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}
