package routes

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// recorder runs nothing: it records command lines and answers the
// gateway queries with out.
type recorder struct {
	lines []string
	out   map[string]string // command line -> output
	fail  map[string]bool
}

func (r *recorder) run(_ context.Context, name string, args ...string) ([]byte, error) {
	line := strings.Join(append([]string{name}, args...), " ")
	r.lines = append(r.lines, line)
	if r.fail[line] {
		return nil, errors.New("failed: " + line)
	}
	return []byte(r.out[line]), nil
}

func (r *recorder) take() []string { l := r.lines; r.lines = nil; return l }

const darwinGet = `   route to: default
destination: default
       mask: default
    gateway: 192.168.1.1
  interface: en0
      flags: <UP,GATEWAY,DONE,STATIC,PRCLONING>
`

const windowsPrint = `===========================================================================
IPv4 Route Table
===========================================================================
Active Routes:
Network Destination        Netmask          Gateway       Interface  Metric
          0.0.0.0          0.0.0.0      192.168.1.1    192.168.1.20     35
          0.0.0.0          0.0.0.0         10.0.0.1        10.0.0.7     50
===========================================================================
`

const windowsPrint6 = `IPv6 Route Table
===========================================================================
Active Routes:
 If Metric Network Destination      Gateway
 12    281 ::/0                     fe80::1
===========================================================================
`

func TestCommandSystems(t *testing.T) {
	mgmt := netip.MustParseAddr("198.51.100.10")
	for _, tc := range []struct {
		name   string
		cmds   commands
		out    map[string]string
		apply  []string
		shrink []string
		close  []string
	}{
		{"darwin", darwinCommands{}, map[string]string{"route -n get -inet default": darwinGet},
			[]string{
				"route -n get -inet default",
				"route -n add -inet -host 198.51.100.10 192.168.1.1",
				"route -n add -inet -net 0.0.0.0/1 -interface utun100",
				"route -n add -inet -net 10.99.0.0/16 -interface utun100",
				"route -n add -inet -net 128.0.0.0/1 -interface utun100",
				"route -n add -inet6 -net ::/1 -interface utun100",
				"route -n add -inet6 -net 2001:db8:1::/48 -interface utun100",
				"route -n add -inet6 -net 8000::/1 -interface utun100",
			},
			[]string{
				"route -n delete -inet -net 0.0.0.0/1 -interface utun100",
				"route -n delete -inet -net 128.0.0.0/1 -interface utun100",
				"route -n delete -inet6 -net ::/1 -interface utun100",
				"route -n delete -inet6 -net 8000::/1 -interface utun100",
				"route -n delete -inet -host 198.51.100.10 192.168.1.1",
			},
			[]string{
				"route -n delete -inet -net 10.99.0.0/16 -interface utun100",
				"route -n delete -inet6 -net 2001:db8:1::/48 -interface utun100",
			}},
		{"windows", windowsCommands{}, map[string]string{"route print -4 0.0.0.0": windowsPrint, "route print -6 ::/0": windowsPrint6},
			[]string{
				"route print -4 0.0.0.0",
				"route add 198.51.100.10 mask 255.255.255.255 192.168.1.1",
				"netsh interface ipv4 add route prefix=0.0.0.0/1 interface=wt0 store=active",
				"netsh interface ipv4 add route prefix=10.99.0.0/16 interface=wt0 store=active",
				"netsh interface ipv4 add route prefix=128.0.0.0/1 interface=wt0 store=active",
				"netsh interface ipv6 add route prefix=::/1 interface=wt0 store=active",
				"netsh interface ipv6 add route prefix=2001:db8:1::/48 interface=wt0 store=active",
				"netsh interface ipv6 add route prefix=8000::/1 interface=wt0 store=active",
			},
			[]string{
				"netsh interface ipv4 delete route prefix=0.0.0.0/1 interface=wt0 store=active",
				"netsh interface ipv4 delete route prefix=128.0.0.0/1 interface=wt0 store=active",
				"netsh interface ipv6 delete route prefix=::/1 interface=wt0 store=active",
				"netsh interface ipv6 delete route prefix=8000::/1 interface=wt0 store=active",
				"route delete 198.51.100.10 mask 255.255.255.255 192.168.1.1",
			},
			[]string{
				"netsh interface ipv4 delete route prefix=10.99.0.0/16 interface=wt0 store=active",
				"netsh interface ipv6 delete route prefix=2001:db8:1::/48 interface=wt0 store=active",
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			iface := "wt0"
			if tc.name == "darwin" {
				iface = "utun100"
			}
			state := filepath.Join(t.TempDir(), "routes.json")
			rec := &recorder{out: tc.out}
			s, err := newCmdSystem(context.Background(), SystemConfig{Interface: iface, StateFile: state}, tc.cmds, rec.run)
			if err != nil {
				t.Fatal(err)
			}
			want := pfx("0.0.0.0/0", "10.99.0.0/16", "2001:db8:1::/48")
			if err := s.Apply(context.Background(), want, []netip.Addr{mgmt}); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.apply, rec.take()); d != "" {
				t.Errorf("apply (-want +got):\n%s", d)
			}
			// The same set again changes nothing: the gateway is asked
			// again (it may have changed), it is the same.
			if err := s.Apply(context.Background(), want, []netip.Addr{mgmt}); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.apply[:1], rec.take()); d != "" {
				t.Errorf("reapply (-want +got):\n%s", d)
			}
			// A crash now: the next start removes what the record holds.
			rec2 := &recorder{}
			if _, err := newCmdSystem(context.Background(), SystemConfig{Interface: iface, StateFile: state}, tc.cmds, rec2.run); err != nil {
				t.Fatal(err)
			}
			if got := len(rec2.take()); got != len(tc.apply)-1 { // all but the gateway query
				t.Errorf("leftover cleanup ran %d commands, want %d", got, len(tc.apply)-1)
			}
			if _, ok, _ := readRecord(state); ok {
				t.Errorf("record kept after the leftover cleanup")
			}
			// Without the exit node the host route goes too.
			if err := s.Apply(context.Background(), want[1:], []netip.Addr{mgmt}); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.shrink, rec.take()); d != "" {
				t.Errorf("shrink (-want +got):\n%s", d)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.close, rec.take()); d != "" {
				t.Errorf("close (-want +got):\n%s", d)
			}
			if _, ok, _ := readRecord(state); ok {
				t.Errorf("record kept after Close")
			}
		})
	}
}

// TestCommandSystemNoGateway: with no default gateway to keep management
// outside, the exit node is left out, with ErrCutsOff, and the rest goes in.
func TestCommandSystemNoGateway(t *testing.T) {
	rec := &recorder{fail: map[string]bool{"route -n get -inet default": true}}
	s, err := newCmdSystem(context.Background(), SystemConfig{Interface: "utun1"}, darwinCommands{}, rec.run)
	if err != nil {
		t.Fatal(err)
	}
	err = s.Apply(context.Background(), pfx("0.0.0.0/0", "10.99.0.0/16"), []netip.Addr{netip.MustParseAddr("198.51.100.10")})
	if !errors.Is(err, ErrCutsOff) {
		t.Fatalf("err = %v, want ErrCutsOff", err)
	}
	// The exit node left out, IPv6 gets no guard: it would block IPv6
	// while IPv4 goes directly.
	want := []string{"route -n get -inet default", "route -n add -inet -net 10.99.0.0/16 -interface utun1"}
	if d := cmp.Diff(want, rec.take()); d != "" {
		t.Errorf("commands (-want +got):\n%s", d)
	}
}

func TestParseGateway(t *testing.T) {
	for _, tc := range []struct {
		name string
		c    commands
		out  string
		v6   bool
		want string
	}{
		{"darwin v4", darwinCommands{}, darwinGet, false, "192.168.1.1"},
		{"darwin v6 zone kept", darwinCommands{}, "gateway: fe80::1%en0\n", true, "fe80::1%en0"},
		{"darwin wrong family", darwinCommands{}, darwinGet, true, ""},
		{"darwin none", darwinCommands{}, "route: writing to routing socket: not in table\n", false, ""},
		{"windows lowest metric", windowsCommands{}, windowsPrint, false, "192.168.1.1"},
		{"windows v6", windowsCommands{}, windowsPrint6, true, "fe80::1"},
		{"windows none", windowsCommands{}, "Active Routes:\nNone\n", false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, ok := tc.c.parseGateway([]byte(tc.out), tc.v6)
			got := ""
			if ok {
				got = a.String()
			}
			if got != tc.want {
				t.Errorf("gateway = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestCommandSystemGuardsIPv6: an exit node for IPv4 alone routes IPv6
// into the tunnel as ::/1 and 8000::/1 (where no peer takes it) instead of
// letting it leave by the host's IPv6 default route; the servers' IPv6
// addresses keep host routes through the IPv6 gateway; the record holds
// the halves, so a restart after a crash removes them, and the IPv6
// default arriving from the map or the exit node going removes the guard.
func TestCommandSystemGuardsIPv6(t *testing.T) {
	mgmt := netip.MustParseAddr("198.51.100.10")
	mgmt6 := netip.MustParseAddr("2001:db8:ff::10")
	for _, tc := range []struct {
		name  string
		cmds  commands
		iface string
		out   map[string]string
		apply []string
		del   []string
	}{
		{"darwin", darwinCommands{}, "utun100", map[string]string{
			"route -n get -inet default":  darwinGet,
			"route -n get -inet6 default": "gateway: fe80::1%en0\ninterface: en0\n",
		}, []string{
			"route -n get -inet default",
			"route -n get -inet6 default",
			"route -n add -inet -host 198.51.100.10 192.168.1.1",
			"route -n add -inet6 -host 2001:db8:ff::10 fe80::1%en0",
			"route -n add -inet -net 0.0.0.0/1 -interface utun100",
			"route -n add -inet -net 128.0.0.0/1 -interface utun100",
			"route -n add -inet6 -net ::/1 -interface utun100",
			"route -n add -inet6 -net 8000::/1 -interface utun100",
		}, []string{
			"route -n delete -inet6 -net ::/1 -interface utun100",
			"route -n delete -inet6 -net 8000::/1 -interface utun100",
		}},
		{"windows", windowsCommands{}, "wt0", map[string]string{
			"route print -4 0.0.0.0": windowsPrint,
			"route print -6 ::/0":    strings.ReplaceAll(windowsPrint6, "fe80::1", "2001:db8:200::2"),
		}, []string{
			"route print -4 0.0.0.0",
			"route print -6 ::/0",
			"route add 198.51.100.10 mask 255.255.255.255 192.168.1.1",
			"route add 2001:db8:ff::10/128 2001:db8:200::2",
			"netsh interface ipv4 add route prefix=0.0.0.0/1 interface=wt0 store=active",
			"netsh interface ipv4 add route prefix=128.0.0.0/1 interface=wt0 store=active",
			"netsh interface ipv6 add route prefix=::/1 interface=wt0 store=active",
			"netsh interface ipv6 add route prefix=8000::/1 interface=wt0 store=active",
		}, []string{
			"netsh interface ipv6 delete route prefix=::/1 interface=wt0 store=active",
			"netsh interface ipv6 delete route prefix=8000::/1 interface=wt0 store=active",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			state := filepath.Join(t.TempDir(), "routes.json")
			rec := &recorder{out: tc.out}
			cfg := SystemConfig{Interface: tc.iface, StateFile: state}
			s, err := newCmdSystem(ctx, cfg, tc.cmds, rec.run)
			if err != nil {
				t.Fatal(err)
			}
			keep := []netip.Addr{mgmt, mgmt6}
			if err := s.Apply(ctx, pfx("0.0.0.0/0"), keep); err != nil {
				t.Fatal(err)
			}
			got := rec.take()
			// The two gateway queries run in the order of the map walk.
			slicesSortHead(got, 2)
			if d := cmp.Diff(tc.apply, got); d != "" {
				t.Errorf("apply (-want +got):\n%s", d)
			}
			r, ok, err := readRecord(state)
			if err != nil || !ok || !slices.Contains(r.Routes, netip.MustParsePrefix("::/1")) || !slices.Contains(r.Routes, netip.MustParsePrefix("8000::/1")) {
				t.Fatalf("record %+v (%v, %v) lacks the IPv6 halves", r, ok, err)
			}
			// Killed now: the next start removes the halves too.
			rec2 := &recorder{}
			if _, err := newCmdSystem(ctx, cfg, tc.cmds, rec2.run); err != nil {
				t.Fatal(err)
			}
			if left := rec2.take(); !slices.Contains(left, tc.del[0]) || !slices.Contains(left, tc.del[1]) {
				t.Errorf("leftover cleanup %q does not remove the IPv6 halves", left)
			}
			// The map brings ::/0 (the exit node carries IPv6): the same
			// halves stay, nothing is deleted or added for IPv6.
			s, err = newCmdSystem(ctx, cfg, tc.cmds, rec.run)
			if err != nil {
				t.Fatal(err)
			}
			rec.take()
			if err := s.Apply(ctx, pfx("0.0.0.0/0"), keep); err != nil {
				t.Fatal(err)
			}
			rec.take()
			if err := s.Apply(ctx, pfx("0.0.0.0/0", "::/0"), keep); err != nil {
				t.Fatal(err)
			}
			if got := rec.take(); len(got) != 2 {
				t.Errorf("::/0 replacing the guard ran %q, want only the gateway queries", got)
			}
			// A route that is not a default: no guard, the halves go.
			if err := s.Apply(ctx, pfx("0.0.0.0/0"), keep); err != nil {
				t.Fatal(err)
			}
			rec.take()
			if err := s.Apply(ctx, pfx("10.99.0.0/16"), keep); err != nil {
				t.Fatal(err)
			}
			got = rec.take()
			for _, d := range tc.del {
				if !slices.Contains(got, d) {
					t.Errorf("without the exit node %q did not run; ran %q", d, got)
				}
			}
			if err := s.Close(ctx); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCommandSystemGuardNoIPv6Gateway: a host without an IPv6 default
// gateway still gets the guard (nothing to keep outside, nothing to leak
// by), without an error.
func TestCommandSystemGuardNoIPv6Gateway(t *testing.T) {
	rec := &recorder{out: map[string]string{"route -n get -inet default": darwinGet}}
	s, err := newCmdSystem(context.Background(), SystemConfig{Interface: "utun1"}, darwinCommands{}, rec.run)
	if err != nil {
		t.Fatal(err)
	}
	keep := []netip.Addr{netip.MustParseAddr("198.51.100.10"), netip.MustParseAddr("2001:db8:ff::10")}
	if err := s.Apply(context.Background(), pfx("0.0.0.0/0"), keep); err != nil {
		t.Fatalf("IPv4 exit node on a host without IPv6 gateway: %v", err)
	}
	got := rec.take()
	for _, w := range []string{"route -n add -inet6 -net ::/1 -interface utun1", "route -n add -inet6 -net 8000::/1 -interface utun1"} {
		if !slices.Contains(got, w) {
			t.Errorf("%q did not run; ran %q", w, got)
		}
	}
}

func slicesSortHead(s []string, n int) {
	if len(s) >= n {
		slices.Sort(s[:n])
	}
}
