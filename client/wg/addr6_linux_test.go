package wg

import (
	"log/slog"
	"net/netip"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/netlab"
)

// TestSetAddress6: a wireguard-go TUN interface in its own namespace
// takes the IPv6 overlay address beside the IPv4 one (usable at once: no
// duplicate address detection), moves to another one in place, and drops
// it again; the kernel's link-local address and the IPv4 address stay.
func TestSetAddress6(t *testing.T) {
	l := netlab.New(t)
	ns, _, _, _ := l.Pair("v6", "other")
	priv, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	var d *Device
	if err := netlab.Do(ns, func() (err error) {
		d, err = New(Config{Name: "wt6test", Private: priv}, slog.New(slog.DiscardHandler))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = netlab.Do(ns, func() error { d.Close(); return nil }) }()
	v4 := netip.MustParsePrefix("100.77.0.5/16")
	first, second := netip.MustParsePrefix("fd00:1:2:3::5/64"), netip.MustParsePrefix("fd00:1:2:3::9/64")
	addrs := func() string {
		t.Helper()
		out, err := l.Exec(ns, "ip", "-o", "addr", "show", "dev", "wt6test")
		if err != nil {
			t.Fatalf("ip addr: %v: %s", err, out)
		}
		return out
	}
	set := func(p netip.Prefix) {
		t.Helper()
		if err := netlab.Do(ns, func() error { return d.SetAddress6(p) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := netlab.Do(ns, func() error { return d.SetAddress(v4, 1280) }); err != nil {
		t.Fatal(err)
	}
	set(first)
	out := addrs()
	// The overlay address is usable at once (no DAD); the kernel's own
	// link-local address may still be tentative, which is not ours.
	tentative := false
	for _, line := range strings.Split(out, "\n") {
		tentative = tentative || strings.Contains(line, "inet6 "+first.String()) && strings.Contains(line, "tentative")
	}
	if !strings.Contains(out, "inet6 "+first.String()) || !strings.Contains(out, "inet "+v4.String()) || tentative {
		t.Fatalf("after SetAddress6(%s):\n%s", first, out)
	}
	if r, err := l.Exec(ns, "ip", "-6", "route", "show", "dev", "wt6test"); err != nil || !strings.Contains(r, first.Masked().String()) {
		t.Fatalf("no route for the IPv6 overlay %s: %v\n%s", first.Masked(), err, r)
	}
	// The address answers at once (a ping to it loops back locally).
	if o, err := l.Exec(ns, "ping", "-6", "-c", "1", "-W", "1", first.Addr().String()); err != nil {
		t.Fatalf("ping own IPv6 address: %v: %s", err, o)
	}
	set(second)
	if out := addrs(); strings.Contains(out, first.Addr().String()) || !strings.Contains(out, "inet6 "+second.String()) {
		t.Fatalf("after the move to %s:\n%s", second, out)
	}
	set(second) // unchanged: nothing to do, no error
	set(netip.Prefix{})
	if out := addrs(); strings.Contains(out, "fd00:") || !strings.Contains(out, "inet "+v4.String()) {
		t.Fatalf("after removing the IPv6 address:\n%s", out)
	}
}
