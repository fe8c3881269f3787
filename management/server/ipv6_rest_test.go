package server_test

import (
	"context"
	"net/netip"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestIPv6REST: a new account has a random ULA /64 enabled for the All
// group; peers whose agent reports the IPv6 overlay (and did not turn it
// off) get an address in it, shown as peer ipv6; a new network_range_v6
// moves them keeping their interface IDs; ipv6_enabled_groups decides who
// keeps one, names only existing groups and keeps its groups from being
// deleted.
func TestIPv6REST(t *testing.T) { engines.Each(t, testIPv6REST) }

func testIPv6REST(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx := context.Background()
	acc := accountOf(o)
	id := acc["id"].(string)
	s := obj(acc["settings"])
	net6, err := netip.ParsePrefix(s["network_range_v6"].(string))
	if err != nil || net6.Bits() != 64 || !netip.MustParsePrefix("fd00::/8").Contains(net6.Addr()) {
		t.Fatalf("network_range_v6 = %v (%v), want a ULA /64", s["network_range_v6"], err)
	}
	var allID string
	for _, g := range list(o.call("GET", "/api/groups", nil, 200)) {
		if obj(g)["name"] == "All" {
			allID = obj(g)["id"].(string)
		}
	}
	if gs := s["ipv6_enabled_groups"].([]any); len(gs) != 1 || gs[0] != allID {
		t.Fatalf("ipv6_enabled_groups = %v, want the All group %s", gs, allID)
	}

	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	join := func(name string, v6, disable bool) *testpeer.Peer {
		t.Helper()
		p := testpeer.New(e.conn, name)
		p.IPv6, p.DisableIPv6 = v6, disable
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatalf("login of %s: %v", name, err)
		}
		return p
	}
	v6 := join("v6", true, false)
	v4 := join("v4only", false, false)
	join("disabled", true, true)
	peerIPv6 := func() map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
			m := obj(p)
			v, _ := m["ipv6"].(string)
			out[m["name"].(string)] = v
		}
		return out
	}
	got := peerIPv6()
	a, err := netip.ParseAddr(got["v6"])
	if err != nil || !net6.Contains(a) || a == net6.Addr() {
		t.Fatalf("peer v6 has ipv6 %q, want a host of %s", got["v6"], net6)
	}
	if got["v4only"] != "" || got["disabled"] != "" {
		t.Fatalf("peers without the overlay have addresses: %v", got)
	}
	// The list's ip filter matches the IPv6 address too.
	if byIP := list(o.call("GET", "/api/peers?ip="+a.String(), nil, 200)); len(byIP) != 1 || obj(byIP[0])["name"] != "v6" {
		t.Fatalf("GET /api/peers?ip=%s: %v", a, byIP)
	}

	// An agent that stops reporting the overlay keeps its address (the
	// maps leave it out); one that starts reporting it gets one.
	v6.IPv6, v4.IPv6 = false, true
	for _, p := range []*testpeer.Peer{v6, v4} {
		if _, err := p.Login(ctx, ""); err != nil {
			t.Fatalf("login of %s: %v", p.Hostname, err)
		}
	}
	got = peerIPv6()
	if got["v6"] != a.String() || got["v4only"] == "" || got["v4only"] == got["v6"] {
		t.Fatalf("after the capability changes: %v, want v6 to keep %s and v4only a new one", got, a)
	}
	v6.IPv6 = true
	if _, err := v6.Login(ctx, ""); err != nil {
		t.Fatal(err)
	}

	// A new range moves the address, keeping its interface ID.
	put := func(settings map[string]any, code int) map[string]any {
		t.Helper()
		return obj(o.call("PUT", "/api/accounts/"+id, map[string]any{"settings": settings}, code))
	}
	base := func() map[string]any {
		m := tfSettings()
		delete(m, "ipv6_enabled_groups")
		delete(m, "network_range_v6")
		delete(m, "network_range")
		return m
	}
	m := base()
	m["network_range_v6"] = "fd00:1:2:3:4::/64"
	if r := obj(put(m, 200)["settings"]); r["network_range_v6"] != "fd00:1:2:3::/64" || len(r["ipv6_enabled_groups"].([]any)) != 1 {
		t.Fatalf("after PUT: network_range_v6 %v, ipv6_enabled_groups %v (omitted: kept)", r["network_range_v6"], r["ipv6_enabled_groups"])
	}
	moved := netip.MustParseAddr(peerIPv6()["v6"])
	mb, ab := moved.As16(), a.As16()
	if !netip.MustParsePrefix("fd00:1:2:3::/64").Contains(moved) || [8]byte(mb[8:]) != [8]byte(ab[8:]) {
		t.Fatalf("after the move ipv6 is %s, want fd00:1:2:3:: with the interface ID of %s", moved, a)
	}

	// A group of its own keeps the peer's address; groups without it take
	// the address away; a named group cannot be deleted.
	var v6ID string
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		if obj(p)["name"] == "v6" {
			v6ID = obj(p)["id"].(string)
		}
	}
	g := obj(o.call("POST", "/api/groups", map[string]any{"name": "v6peers", "peers": []string{v6ID}}, 200))["id"].(string)
	empty := obj(o.call("POST", "/api/groups", map[string]any{"name": "nobody", "peers": []string{}}, 200))["id"].(string)
	m = base()
	m["ipv6_enabled_groups"] = []string{g}
	put(m, 200)
	if got := peerIPv6()["v6"]; got != moved.String() {
		t.Fatalf("in an enabled group the address changed: %s, want %s", got, moved)
	}
	m["ipv6_enabled_groups"] = []string{empty}
	put(m, 200)
	if got := peerIPv6()["v6"]; got != "" {
		t.Fatalf("outside every enabled group the peer keeps %s", got)
	}
	// Membership of an enabled group decides: joining gives an address,
	// leaving takes it away.
	o.call("PUT", "/api/groups/"+empty, map[string]any{"name": "nobody", "peers": []string{v6ID}}, 200)
	if got := peerIPv6()["v6"]; got == "" {
		t.Fatal("joining an enabled group gave no address")
	}
	o.call("PUT", "/api/groups/"+empty, map[string]any{"name": "nobody", "peers": []string{}}, 200)
	if got := peerIPv6()["v6"]; got != "" {
		t.Fatalf("leaving the enabled group kept %s", got)
	}
	// An admin's address: only for a peer in an enabled group, inside the
	// range, not the anycast address, not another peer's.
	upd := func(ip string, code int) map[string]any {
		t.Helper()
		return obj(o.call("PUT", "/api/peers/"+v6ID, map[string]any{"name": "v6", "ssh_enabled": false, "login_expiration_enabled": false,
			"inactivity_expiration_enabled": false, "ipv6": ip}, code))
	}
	if msg := upd("fd00:1:2:3::77", 412)["message"].(string); !strings.Contains(msg, "ipv6") {
		t.Fatalf("ipv6 for a peer in no enabled group: %s", msg)
	}
	o.call("PUT", "/api/groups/"+empty, map[string]any{"name": "nobody", "peers": []string{v6ID}}, 200)
	for _, bad := range []string{"fd00:9::77", "fd00:1:2:3::", "10.0.0.1", "nonsense"} {
		if msg := upd(bad, 422)["message"].(string); !strings.Contains(msg, "ipv6") {
			t.Errorf("ipv6 %s: message %q does not name ipv6", bad, msg)
		}
	}
	if got := upd("fd00:1:2:3::77", 200); got["ipv6"] != "fd00:1:2:3::77" {
		t.Fatalf("PUT ipv6: %v", got["ipv6"])
	}
	if got := peerIPv6()["v6"]; got != "fd00:1:2:3::77" {
		t.Fatalf("after PUT ipv6 the list shows %q", got)
	}
	o.call("PUT", "/api/groups/"+empty, map[string]any{"name": "nobody", "peers": []string{}}, 200)

	body := obj(o.call("DELETE", "/api/groups/"+empty, nil, 412))
	if !strings.Contains(body["message"].(string), "ipv6_enabled_groups") {
		t.Fatalf("delete of an IPv6 group: %v", body)
	}
	// Back to All: the capable peer gets an address again.
	m["ipv6_enabled_groups"] = []string{allID}
	put(m, 200)
	if got := peerIPv6(); got["v6"] == "" || got["v4only"] == "" || got["disabled"] != "" {
		t.Fatalf("with All enabled again: %v", got)
	}
	o.call("DELETE", "/api/groups/"+empty, nil, 200)
	// AccessiblePeer carries ipv6 too (the Default policy lets all reach all).
	var v4ID string
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		if obj(p)["name"] == "v4only" {
			v4ID = obj(p)["id"].(string)
		}
	}
	want := peerIPv6()["v6"]
	found := false
	for _, p := range list(o.call("GET", "/api/peers/"+v4ID+"/accessible-peers", nil, 200)) {
		m := obj(p)
		if m["name"] == "v6" {
			found = m["ipv6"] == want
		} else if _, has := m["ipv6"]; has {
			t.Errorf("accessible peer %v has an ipv6", m["name"])
		}
	}
	if !found {
		t.Errorf("accessible peers lack v6 with ipv6 %s", want)
	}
}
