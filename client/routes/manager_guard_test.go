package routes

import (
	"context"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
)

// TestManagerDropsUnroutable: prefixes of the map and addresses a domain
// resolves to that lie in the overlay, loopback, link-local or multicast,
// or are unspecified without being a default route, are neither put into
// a routing peer's allowed IPs nor installed; exit nodes stay.
func TestManagerDropsUnroutable(t *testing.T) {
	peer := testKey(t, 1)
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		var out []netip.Addr
		for _, s := range []string{"100.64.0.9", "127.0.0.1", "203.0.113.5", "::1", "fe80::1", "224.0.0.1", "ff02::1", "0.0.0.0", "::ffff:100.64.0.10"} {
			out = append(out, netip.MustParseAddr(s))
		}
		return out, nil
	}
	sys := &fakeSystem{}
	m := NewManager(Config{System: sys, Lookup: lookup})
	m.SetOverlay(netip.MustParsePrefix("100.64.0.1/16"))
	var rs []Route
	for i, p := range []string{
		"100.64.0.7/32", "100.64.0.0/16", "100.64.128.0/17", "127.0.0.0/8", "169.254.0.0/16", "fe80::/64",
		"224.0.0.0/4", "ff02::/16", "0.0.0.0/8", "::/8", "10.1.0.0/16", "0.0.0.0/0", "::/0",
	} {
		netID := fmt.Sprintf("n%02d", i)
		switch p {
		case "0.0.0.0/0":
			netID = "exit"
		case "::/0":
			netID = "exit-v6"
		}
		rs = append(rs, Route{ID: netID, NetID: netID, Prefix: netip.MustParsePrefix(p), Peer: peer})
	}
	rs = append(rs, Route{ID: "d", NetID: "web", Domains: []string{"hijack.example"}, Peer: peer})
	m.Update(rs)
	if _, err := m.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	plan, err := m.Evaluate(context.Background(), func(key.Public) (PeerConn, bool) { return up, true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := pfx("0.0.0.0/0", "10.1.0.0/16", "203.0.113.5/32", "::/0")
	if d := cmp.Diff(Plan{peer: want}, plan, cmpNet); d != "" {
		t.Errorf("plan (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, sys.installed, cmpNet); d != "" {
		t.Errorf("installed (-want +got):\n%s", d)
	}
	// The overlay moves onto the resolved address: it leaves the plan.
	m.SetOverlay(netip.MustParsePrefix("203.0.113.1/24"))
	plan, err = m.Evaluate(context.Background(), func(key.Public) (PeerConn, bool) { return up, true }, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(Plan{peer: pfx("0.0.0.0/0", "10.1.0.0/16", "::/0")}, plan, cmpNet); d != "" {
		t.Errorf("plan after the overlay changed (-want +got):\n%s", d)
	}
}

// TestManagerCaps: a map with more than MaxClientRoutes routes installs
// the first MaxClientRoutes; a domain is routed to at most MaxDomainAddrs
// addresses.
func TestManagerCaps(t *testing.T) {
	peer := testKey(t, 1)
	lookup := func(context.Context, string) ([]netip.Addr, error) {
		var out []netip.Addr
		for i := range 100 {
			out = append(out, netip.AddrFrom4([4]byte{203, 0, 113, byte(i)}))
		}
		return out, nil
	}
	sys := &fakeSystem{}
	m := NewManager(Config{System: sys, Lookup: lookup})
	rs := []Route{{ID: "d", NetID: "a-web", Domains: []string{"many.example"}, Peer: peer}}
	for i := range MaxClientRoutes + 10 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
		rs = append(rs, Route{ID: fmt.Sprint(i), NetID: fmt.Sprint(i), Prefix: p, Peer: peer})
	}
	m.Update(rs)
	if _, err := m.Resolve(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Evaluate(context.Background(), func(key.Public) (PeerConn, bool) { return up, true }, nil); err != nil {
		t.Fatal(err)
	}
	domain := slices.DeleteFunc(slices.Clone(sys.installed), func(p netip.Prefix) bool { return p.Bits() != 32 })
	if got, want := len(sys.installed), MaxClientRoutes-1+MaxDomainAddrs; got != want {
		t.Errorf("installed %d prefixes, want %d", got, want)
	}
	if len(domain) != MaxDomainAddrs {
		t.Errorf("domain installed %d addresses, want %d", len(domain), MaxDomainAddrs)
	}
	if slices.Contains(sys.installed, netip.MustParsePrefix("10.16.0.0/24")) {
		t.Errorf("a route past the cap was installed")
	}
}

// TestManagerFollowsGateway: with an exit node on, the laptop moves to
// another network; within gatewayRefresh the host route to management
// goes through the new gateway, though the map did not change.
func TestManagerFollowsGateway(t *testing.T) {
	rec := &recorder{out: map[string]string{"route -n get -inet default": darwinGet}}
	s, err := newCmdSystem(context.Background(), SystemConfig{Interface: "utun5", StateFile: filepath.Join(t.TempDir(), "r.json")}, darwinCommands{}, rec.run)
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	m := NewManager(Config{System: s, Now: clk.now})
	m.Update([]Route{{ID: "x", NetID: "exit", Prefix: netip.MustParsePrefix("0.0.0.0/0"), Peer: testKey(t, 1)}})
	keep := []netip.Addr{netip.MustParseAddr("198.51.100.10")}
	conn := func(key.Public) (PeerConn, bool) { return up, true }
	eval := func() {
		t.Helper()
		if _, err := m.Evaluate(context.Background(), conn, keep); err != nil {
			t.Fatal(err)
		}
	}
	eval()
	if !slices.Contains(rec.take(), "route -n add -inet -host 198.51.100.10 192.168.1.1") {
		t.Fatal("no host route through the first gateway")
	}
	rec.out["route -n get -inet default"] = "gateway: 10.20.0.1\n"
	var moved []string
	for range 10 {
		clk.t = clk.t.Add(time.Second)
		eval()
		if l := rec.take(); len(l) > 1 {
			moved = l
			break
		}
	}
	want := []string{
		"route -n get -inet default",
		"route -n delete -inet -host 198.51.100.10 192.168.1.1",
		"route -n add -inet -host 198.51.100.10 10.20.0.1",
	}
	if d := cmp.Diff(want, moved); d != "" {
		t.Errorf("after the gateway changed (-want +got):\n%s", d)
	}
	if err := m.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if l := rec.take(); !slices.Contains(l, "route -n delete -inet -host 198.51.100.10 10.20.0.1") {
		t.Errorf("close did not remove the host route through the new gateway: %v", l)
	}
}
