//go:build linux

package routes

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
)

// v6Host is a host with an IPv6 LAN (2001:db8:200::/64, default route
// through ::2) and an IPv6 overlay address on the tunnel interface,
// beside newHost's IPv4 setup.
func v6Host(t *testing.T) *host {
	h := newHost(t)
	h.ip("-6", "addr", "add", "2001:db8:200::1/64", "dev", "eth0", "nodad")
	h.ip("-6", "addr", "add", "fd00:1234::1/64", "dev", "wt0", "nodad")
	h.ip("-6", "route", "add", "default", "via", "2001:db8:200::2", "dev", "eth0")
	return h
}

var (
	mgmt6    = netip.MustParseAddr("2001:db8:ff::10") // a management server reached over IPv6
	lan6Host = "2001:db8:200::7"
	exits    = []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
)

// TestLinuxIPv6ExitNode: an exit node's IPv4 and IPv6 default routes go
// into the table with the same rules for both families; the agent's
// marked traffic to its IPv6 server leaves by the LAN, everything else
// enters the tunnel, the IPv6 LAN stays outside with KeepLAN and goes in
// without it; an apply without the exit node and Close leave nothing.
func TestLinuxIPv6ExitNode(t *testing.T) {
	for _, keepLAN := range []bool{true, false} {
		name := "LAN kept"
		if !keepLAN {
			name = "LAN blocked"
		}
		t.Run(name, func(t *testing.T) {
			h := v6Host(t)
			s := h.system(keepLAN, true)
			defer s.Close(context.Background())
			want := append(exits, netip.MustParsePrefix("2001:db8:1::/48"))
			if err := s.Apply(context.Background(), want, []netip.Addr{mgmt, mgmt6}); err != nil {
				t.Fatal(err)
			}
			tb := h.ip("-6", "route", "show", "table", "7120")
			for _, p := range []string{"default dev wt0", "2001:db8:1::/48 dev wt0"} {
				if !strings.Contains(tb, p) {
					t.Errorf("IPv6 table 7120 lacks %q:\n%s", p, tb)
				}
			}
			v6rules := h.ip("-6", "rule")
			if !strings.Contains(strings.ReplaceAll(v6rules, "lookup netbird", "lookup 7120"), "110:\tnot from all fwmark 0x1bd00 lookup 7120") {
				t.Errorf("no IPv6 rule to the table:\n%s", v6rules)
			}
			if got := strings.Contains(v6rules, "suppress_prefixlength 0"); got != keepLAN {
				t.Errorf("IPv6 suppress rule there: %v, want %v:\n%s", got, keepLAN, v6rules)
			}
			lanDev := "eth0"
			if !keepLAN {
				lanDev = "wt0"
			}
			for _, c := range []struct {
				dst    string
				marked bool
				dev    string
			}{
				{mgmt6.String(), true, "eth0"},   // the agent's own traffic to its server
				{mgmt6.String(), false, "wt0"},   // anyone else's: the exit node
				{"2001:db8:77::1", false, "wt0"}, // the IPv6 internet
				{"2001:db8:77::1", true, "eth0"}, // the agent's own sockets never enter the tunnel
				{lan6Host, false, lanDev},        // the IPv6 LAN: by the flag
				{lan6Host, true, "eth0"},
				{"fd00:1234::9", false, "wt0"}, // a peer's overlay address: the interface's own route
				{"8.8.8.8", false, "wt0"},      // IPv4 through the same exit node
			} {
				if got := h.dev(c.dst, c.marked); got != c.dev {
					t.Errorf("route get %s (marked %v): dev %s, want %s", c.dst, c.marked, got, c.dev)
				}
			}
			// The exit node deselected: both defaults go, the network stays.
			if err := s.Apply(context.Background(), want[2:], []netip.Addr{mgmt, mgmt6}); err != nil {
				t.Fatal(err)
			}
			if tb := strings.TrimSpace(h.ip("-6", "route", "show", "table", "7120")); tb != "2001:db8:1::/48 dev wt0 metric 1024 pref medium" {
				t.Errorf("after deselecting the exit node, IPv6 table 7120:\n%s", tb)
			}
			if got := h.dev("2001:db8:77::1", false); got != "eth0" {
				t.Errorf("without the exit node, the IPv6 internet goes by %s", got)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			h.expectClean("after Close")
		})
	}
}

// TestLinuxIPv6CrashLeftovers: IPv6 routes and rules a killed agent left
// are removed at the next start, as IPv4 ones are.
func TestLinuxIPv6CrashLeftovers(t *testing.T) {
	h := v6Host(t)
	s := h.system(true, true)
	if err := s.Apply(context.Background(), exits, []netip.Addr{mgmt6}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(h.ip("-6", "route", "show", "table", "7120"), "default dev wt0") {
		t.Fatal("no IPv6 default route installed")
	}
	s.h.Close() // killed: no Close
	s2 := h.system(true, true)
	defer s2.Close(context.Background())
	h.expectClean("after the restart")
	if got := h.dev("2001:db8:77::1", false); got != "eth0" {
		t.Errorf("after the restart, the IPv6 internet goes by %s", got)
	}
}

// TestLinuxIPv6NoMarkNoCutOff: without socket marks, ::/0 covering the
// IPv6 management address is left out with ErrCutsOff, as 0.0.0.0/0 is
// for an IPv4 one; a narrower IPv6 route still goes in.
func TestLinuxIPv6NoMarkNoCutOff(t *testing.T) {
	h := v6Host(t)
	s := h.system(true, false)
	defer s.Close(context.Background())
	err := s.Apply(context.Background(), []netip.Prefix{netip.MustParsePrefix("::/0"), netip.MustParsePrefix("2001:db8:1::/48")}, []netip.Addr{mgmt6})
	if !errors.Is(err, ErrCutsOff) || !strings.Contains(err.Error(), "::/0") {
		t.Fatalf("err = %v, want ErrCutsOff naming ::/0", err)
	}
	if tb := h.ip("-6", "route", "show", "table", "7120"); strings.Contains(tb, "default") || !strings.Contains(tb, "2001:db8:1::/48") {
		t.Errorf("IPv6 table 7120:\n%s", tb)
	}
	if got := h.dev(mgmt6.String(), false); got != "eth0" {
		t.Errorf("IPv6 management goes by %s", got)
	}
}

// routeGet is `ip route get dst` without failing the test: an
// unreachable destination is an error of ip.
func (h *host) routeGet(dst string) string {
	out, err := h.l.Exec(h.ns, "ip", "route", "get", dst)
	if err != nil {
		return "error: " + strings.TrimSpace(out)
	}
	return out
}

// TestLinuxIPv4ExitNodeGuardsIPv6: an exit node for IPv4 alone makes the
// IPv6 internet unreachable (not leaking past it) while the agent's own
// traffic and, with KeepLAN, the IPv6 LAN stay outside; the IPv6 default
// arriving (an IPv6 overlay address) replaces the guard and leaving turns
// it back, neither deleting the other; deselecting, a crash and Close
// leave nothing.
func TestLinuxIPv4ExitNodeGuardsIPv6(t *testing.T) {
	h := v6Host(t)
	s := h.system(true, true)
	defer s.Close(context.Background())
	keep := []netip.Addr{mgmt, mgmt6}
	apply := func(ps ...netip.Prefix) {
		t.Helper()
		if err := s.Apply(context.Background(), ps, keep); err != nil {
			t.Fatal(err)
		}
	}
	v4only := exits[:1]
	internet6 := "2001:db8:77::1"
	apply(v4only...)
	if got := h.routeGet(internet6); !strings.Contains(got, "No route to host") {
		t.Errorf("IPv6 internet with an IPv4 exit node: %q, want unreachable", got)
	}
	for _, c := range []struct {
		dst    string
		marked bool
		dev    string
	}{
		{mgmt6.String(), true, "eth0"}, // the agent's own IPv6 traffic
		{lan6Host, false, "eth0"},      // the LAN, kept
		{"8.8.8.8", false, "wt0"},
	} {
		if got := h.dev(c.dst, c.marked); got != c.dev {
			t.Errorf("route get %s (marked %v): dev %s, want %s", c.dst, c.marked, got, c.dev)
		}
	}
	// The IPv6 half arrives: it replaces the guard.
	apply(exits...)
	if got := h.dev(internet6, false); got != "wt0" {
		t.Errorf("with ::/0 the IPv6 internet goes by %s, want wt0", got)
	}
	if tb := h.ip("-6", "route", "show", "table", "7120"); strings.Contains(tb, "unreachable") {
		t.Errorf("guard left beside ::/0:\n%s", tb)
	}
	// And leaves: the guard is back.
	apply(v4only...)
	if got := h.routeGet(internet6); !strings.Contains(got, "No route to host") {
		t.Errorf("IPv6 internet after ::/0 left: %q, want unreachable", got)
	}
	// Deselected: the IPv6 internet goes directly again.
	apply()
	if got := h.dev(internet6, false); got != "eth0" {
		t.Errorf("without the exit node the IPv6 internet goes by %s", got)
	}
	h.expectClean("after deselecting")
	// Killed with the guard installed: the next start removes it.
	apply(v4only...)
	s.h.Close()
	s2 := h.system(true, true)
	defer s2.Close(context.Background())
	h.expectClean("after the restart")
	// Without socket marks the guard would cut off an IPv6 server: left out.
	s3 := h.system(true, false)
	defer s3.Close(context.Background())
	if err := s3.Apply(context.Background(), v4only, []netip.Addr{mgmt6}); err != nil {
		t.Fatalf("an IPv4 exit node with an IPv6 server, no marks: %v", err)
	}
	if tb := h.ip("-6", "route", "show", "table", "7120"); strings.Contains(tb, "unreachable") {
		t.Errorf("guard installed although it cuts off the IPv6 server:\n%s", tb)
	}
}

// TestLinuxIPv4ExitNodeGuardKeepsOverlay6: with the LAN blocked (no rule
// consulting the main table first) an IPv4-only exit node's guard would
// catch the IPv6 overlay too, cutting this peer off from the other peers'
// IPv6 addresses; the table gets the IPv6 overlay through the tunnel
// while the guard is in, and loses it with the guard.
func TestLinuxIPv4ExitNodeGuardKeepsOverlay6(t *testing.T) {
	for _, keepLAN := range []bool{false, true} {
		t.Run(fmt.Sprintf("keepLAN=%v", keepLAN), func(t *testing.T) {
			h := v6Host(t)
			s := h.system(keepLAN, true)
			defer s.Close(context.Background())
			m := NewManager(Config{System: s, Overlay: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/10")}})
			m.SetOverlay(netip.MustParsePrefix("100.64.0.0/10"), netip.MustParsePrefix("fd00:1234::/64"))
			keep := []netip.Addr{mgmt, mgmt6}
			if err := s.Apply(context.Background(), exits[:1], keep); err != nil {
				t.Fatal(err)
			}
			if got := h.routeGet("2001:db8:77::1"); !strings.Contains(got, "No route to host") {
				t.Errorf("IPv6 internet with an IPv4 exit node: %q, want unreachable", got)
			}
			if got := h.dev("fd00:1234::9", false); got != "wt0" {
				t.Errorf("a peer's IPv6 overlay address goes by %s, want wt0", got)
			}
			tb := h.ip("-6", "route", "show", "table", "7120")
			if !strings.Contains(tb, "fd00:1234::/64 dev wt0") {
				t.Errorf("IPv6 table 7120 lacks the overlay:\n%s", tb)
			}
			// The IPv6 default arrives: no guard, no overlay route needed.
			if err := s.Apply(context.Background(), exits, keep); err != nil {
				t.Fatal(err)
			}
			if tb := h.ip("-6", "route", "show", "table", "7120"); strings.Contains(tb, "fd00:1234::") {
				t.Errorf("overlay kept in the table without the guard:\n%s", tb)
			}
			if got := h.dev("fd00:1234::9", false); got != "wt0" {
				t.Errorf("with ::/0 a peer's IPv6 overlay address goes by %s, want wt0", got)
			}
			if err := s.Apply(context.Background(), exits[:1], keep); err != nil {
				t.Fatal(err)
			}
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			h.expectClean("after Close")
			if tb := strings.TrimSpace(h.ip("-6", "route", "show", "table", "7120")); tb != "" {
				t.Errorf("after Close IPv6 table 7120 holds:\n%s", tb)
			}
		})
	}
}
