//go:build linux

package routes

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// host is a namespace with a LAN link (eth0, 10.200.N.1/24, default route
// through .2) and a tunnel interface (a "wt0": routes only need a
// link to point at; a veth, as this kernel has no dummy links).
type host struct {
	t     *testing.T
	l     *netlab.Lab
	ns    string
	gw    netip.Addr
	state string
}

func newHost(t *testing.T) *host {
	l := netlab.New(t)
	ns, _, _, gw := l.Pair("a", "b")
	h := &host{t: t, l: l, ns: ns, gw: gw, state: filepath.Join(t.TempDir(), "routes.json")}
	h.ip("link", "add", "wt0", "type", "veth", "peer", "name", "wt0p")
	h.ip("addr", "add", "100.64.0.1/16", "dev", "wt0")
	h.ip("link", "set", "wt0p", "up")
	h.ip("link", "set", "wt0", "up")
	h.ip("route", "add", "default", "via", gw.String())
	return h
}

func (h *host) ip(args ...string) string {
	h.t.Helper()
	out, err := h.l.Exec(h.ns, append([]string{"ip"}, args...)...)
	if err != nil {
		h.t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// system opens the routes of the namespace (the netlink socket is created
// inside it and stays there).
func (h *host) system(keepLAN, canMark bool) *linuxSystem {
	h.t.Helper()
	var s *linuxSystem
	err := netlab.Do(h.ns, func() error {
		nh, err := netlink.NewHandle()
		if err != nil {
			return err
		}
		s, err = newLinux(SystemConfig{Interface: "wt0", StateFile: h.state, KeepLAN: keepLAN}, nh, Table, canMark)
		return err
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return s
}

// dev is the interface `ip route get` picks for dst (with the agent's
// mark when marked).
func (h *host) dev(dst string, marked bool) string {
	h.t.Helper()
	args := []string{"route", "get", dst}
	if marked {
		args = append(args, "mark", "0x1bd00")
	}
	out := h.ip(args...)
	f := strings.Fields(out)
	for i := range f {
		if f[i] == "dev" && i+1 < len(f) {
			return f[i+1]
		}
	}
	h.t.Fatalf("no dev in %q", out)
	return ""
}

func (h *host) table() string {
	return h.ip("route", "show", "table", "7120") + h.ip("-6", "route", "show", "table", "7120")
}

// rules lists the policy rules, with our table by number even where the
// machine's rt_tables names it (an official client's install calls 7120
// "netbird").
func (h *host) rules() string {
	return strings.ReplaceAll(h.ip("rule")+h.ip("-6", "rule"), "lookup netbird", "lookup 7120")
}

func (h *host) expectClean(what string) {
	h.t.Helper()
	if tb := strings.TrimSpace(h.table()); tb != "" {
		h.t.Errorf("%s: table 7120 still holds:\n%s", what, tb)
	}
	if r := h.rules(); strings.Contains(r, "7120") || strings.Contains(r, "suppress_prefixlength") {
		h.t.Errorf("%s: rules left:\n%s", what, r)
	}
	if _, err := os.Stat(h.state); !errors.Is(err, os.ErrNotExist) {
		h.t.Errorf("%s: state file left (err %v)", what, err)
	}
}

var (
	mgmt    = netip.MustParseAddr("198.51.100.10") // the management server, behind the default route
	lanHost = "10.200.1.2"                         // not used for a route: the LAN gateway itself
)

// TestLinuxExitNodeKeepsServersOutside: an exit node and a network in the
// routing table; the agent's marked traffic to management leaves by the
// LAN, everything else enters the tunnel; the LAN stays reachable; fewer
// routes remove the rest; Close removes everything.
func TestLinuxExitNodeKeepsServersOutside(t *testing.T) {
	h := newHost(t)
	s := h.system(true, true)
	defer s.Close(context.Background())
	want := []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/0"),
		netip.MustParsePrefix("10.99.0.0/16"),
		netip.MustParsePrefix("2001:db8:1::/48"),
	}
	if err := s.Apply(context.Background(), want, []netip.Addr{mgmt}); err != nil {
		t.Fatal(err)
	}
	tb := h.table()
	for _, p := range []string{"default dev wt0", "10.99.0.0/16 dev wt0", "2001:db8:1::/48 dev wt0"} {
		if !strings.Contains(tb, p) {
			t.Errorf("table 7120 lacks %q:\n%s", p, tb)
		}
	}
	rules := h.rules()
	for _, r := range []string{"105:\tfrom all lookup main suppress_prefixlength 0", "110:\tnot from all fwmark 0x1bd00 lookup 7120"} {
		if strings.Count(rules, r) != 2 { // IPv4 and IPv6
			t.Errorf("rule %q not there for both families:\n%s", r, rules)
		}
	}
	for _, c := range []struct {
		dst    string
		marked bool
		dev    string
	}{
		{mgmt.String(), true, "eth0"},   // the agent's own traffic to management
		{mgmt.String(), false, "wt0"},   // anyone else's: the exit node
		{"10.99.3.4", false, "wt0"},     // a routed network
		{"10.99.3.4", true, "eth0"},     // the agent's own sockets never enter the tunnel
		{"10.200.1.2", false, "eth0"},   // the LAN stays outside (KeepLAN)
		{"2001:db8:1::5", false, "wt0"}, // IPv6 network
	} {
		if got := h.dev(c.dst, c.marked); got != c.dev {
			t.Errorf("route get %s (marked %v): dev %s, want %s", c.dst, c.marked, got, c.dev)
		}
	}
	// Fewer routes: the others go, the rules stay.
	if err := s.Apply(context.Background(), want[1:2], []netip.Addr{mgmt}); err != nil {
		t.Fatal(err)
	}
	if tb := strings.TrimSpace(h.table()); tb != "10.99.0.0/16 dev wt0 scope link" {
		t.Errorf("after shrinking, table 7120:\n%s", tb)
	}
	if got := h.dev(mgmt.String(), false); got != "eth0" {
		t.Errorf("without the exit node, management goes by %s", got)
	}
	// No routes at all: nothing of ours is left, rules included.
	if err := s.Apply(context.Background(), nil, nil); err != nil {
		t.Fatal(err)
	}
	h.expectClean("after an empty apply")
	if err := s.Apply(context.Background(), want, []netip.Addr{mgmt}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.expectClean("after Close")
}

// TestLinuxLANBlocked: without KeepLAN the exit node takes the LAN too.
func TestLinuxLANBlocked(t *testing.T) {
	h := newHost(t)
	s := h.system(false, true)
	defer s.Close(context.Background())
	if err := s.Apply(context.Background(), []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0")}, []netip.Addr{mgmt}); err != nil {
		t.Fatal(err)
	}
	if got := h.dev("10.200.1.2", false); got != "wt0" {
		t.Errorf("LAN host goes by %s, want wt0 (LAN access off)", got)
	}
	if got := h.dev("10.200.1.2", true); got != "eth0" {
		t.Errorf("the agent's own traffic to the LAN goes by %s, want eth0", got)
	}
	if strings.Contains(h.rules(), "suppress_prefixlength") {
		t.Errorf("suppress rule installed without KeepLAN:\n%s", h.rules())
	}
}

// TestLinuxCrashLeftovers: an agent killed with routes installed leaves
// them; the next start removes exactly those.
func TestLinuxCrashLeftovers(t *testing.T) {
	h := newHost(t)
	s := h.system(true, true)
	if err := s.Apply(context.Background(), []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("10.99.0.0/16")}, nil); err != nil {
		t.Fatal(err)
	}
	s.h.Close() // killed: no Close
	// A route of someone else's in the table survives the cleanup.
	h.ip("route", "add", "10.77.0.0/16", "dev", "wt0", "table", "7120")
	s2 := h.system(true, true)
	defer s2.Close(context.Background())
	if tb := strings.TrimSpace(h.table()); tb != "10.77.0.0/16 dev wt0 scope link" {
		t.Errorf("after the restart, table 7120 holds:\n%s", tb)
	}
	if r := h.rules(); strings.Contains(r, "lookup 7120") || strings.Contains(r, "suppress_prefixlength") {
		t.Errorf("rules left after the restart:\n%s", r)
	}
	if _, err := os.Stat(h.state); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state file left after cleanup (err %v)", err)
	}
	h.ip("route", "del", "10.77.0.0/16", "dev", "wt0", "table", "7120")
}

// TestLinuxNoMarkNoCutOff: where the agent cannot mark its sockets, a
// route covering the management server is left out with an error and the
// others go in.
func TestLinuxNoMarkNoCutOff(t *testing.T) {
	h := newHost(t)
	s := h.system(true, false)
	defer s.Close(context.Background())
	err := s.Apply(context.Background(), []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("10.99.0.0/16")}, []netip.Addr{mgmt})
	if !errors.Is(err, ErrCutsOff) {
		t.Fatalf("err = %v, want ErrCutsOff", err)
	}
	if tb := strings.TrimSpace(h.table()); tb != "10.99.0.0/16 dev wt0 scope link" {
		t.Errorf("table 7120:\n%s", tb)
	}
	if got := h.dev(mgmt.String(), false); got != "eth0" {
		t.Errorf("management goes by %s", got)
	}
}
