package forward

import (
	"context"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/nftfw"
	"github.com/wiremesh/wiremesh/internal/netlab"
)

// TestExitNodeRelaysNoPeer: an exit node (0.0.0.0/0 and ::/0 served,
// allow-all) forwards from the overlay to the internet but never to
// another overlay address, IPv4 or IPv6: the "peer" behind r's LAN
// interface (an overlay address routed there) stands for a peer that
// management left out of c's map. A destination outside the overlays
// still passes, so the drop is the overlay's, not a broken path.
func TestExitNodeRelaysNoPeer(t *testing.T) {
	x := newRoutedLab(t)
	x.sh("ip", "-n", x.c, "addr", "add", "fd70::2/64", "dev", "eth0", "nodad")
	x.sh("ip", "-n", x.r, "addr", "add", "fd70::1/64", "dev", "ov", "nodad")
	x.sh("ip", "-n", x.r, "addr", "add", "fd77::1/64", "dev", "lan", "nodad")
	x.sh("ip", "-n", x.lan, "addr", "add", "fd77::10/64", "dev", "eth0", "nodad")
	x.sh("ip", "netns", "exec", x.r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=0")
	// The "other peer": overlay addresses on the LAN host, routed there
	// by r (and by c through r), with routes back to c.
	peer4, peer6 := netip.MustParseAddr("100.70.0.9"), netip.MustParseAddr("fd70::9")
	x.sh("ip", "-n", x.lan, "addr", "add", "100.70.0.9/32", "dev", "eth0")
	x.sh("ip", "-n", x.lan, "addr", "add", "fd70::9/128", "dev", "eth0", "nodad")
	x.sh("ip", "-n", x.lan, "route", "add", "100.70.0.0/16", "via", "192.168.77.1")
	x.sh("ip", "-n", x.lan, "route", "add", "fd70::/64", "via", "fd77::1")
	x.sh("ip", "-n", x.r, "route", "add", "100.70.0.9/32", "via", "192.168.77.10")
	x.sh("ip", "-n", x.r, "route", "add", "fd70::9/128", "via", "fd77::10")
	x.sh("ip", "-n", x.c, "route", "add", "100.70.0.9/32", "via", "100.70.0.1")
	x.sh("ip", "-n", x.c, "route", "add", "fd70::9/128", "via", "fd70::1")
	x.sh("ip", "-n", x.c, "route", "add", "fd77::/64", "via", "fd70::1")
	var lns []net.Listener
	t.Cleanup(func() {
		for _, ln := range lns {
			ln.Close()
		}
	})
	for _, a := range []netip.Addr{peer4, peer6, x.lanIP, netip.MustParseAddr("fd77::10")} {
		var ln net.Listener
		x.in(x.lan, func() (err error) { ln, err = net.Listen("tcp", netip.AddrPortFrom(a, 8080).String()); return err })
		lns = append(lns, ln)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				c.Close()
			}
		}()
	}
	dial := func(a netip.Addr) bool {
		var c net.Conn
		err := netlab.Do(x.c, func() (err error) {
			d := net.Dialer{Timeout: 700 * time.Millisecond}
			c, err = d.DialContext(context.Background(), "tcp", netip.AddrPortFrom(a, 8080).String())
			return err
		})
		if err == nil {
			c.Close()
		}
		return err == nil
	}
	var fw *nftfw.Firewall
	var fwd *Forwarder
	x.in(x.r, func() (err error) {
		if fw, err = nftfw.New("ov"); err != nil {
			return err
		}
		fwd, err = New(Options{StateDir: t.TempDir(), Interface: "ov"})
		return err
	})
	t.Cleanup(func() { _ = netlab.Do(x.r, func() error { _ = fwd.Close(); return fw.Close() }) })
	exits := []netip.Prefix{netip.MustParsePrefix("0.0.0.0/0"), netip.MustParsePrefix("::/0")}
	overlays := []netip.Prefix{labOverlay, netip.MustParsePrefix("fd70::/64")}
	x.in(x.r, func() error {
		if err := fwd.Apply(overlays, []Route{{Network: exits[0]}, {Network: exits[1]}}); err != nil {
			return err
		}
		if err := fw.SetOverlay(labOverlay); err != nil {
			return err
		}
		if err := fw.SetOverlay6(overlays[1]); err != nil {
			return err
		}
		return fw.SetRouting(acl.Routing{Networks: exits, AllowAll: true})
	})
	// Neighbour discovery first (a second on veths), outside the rules.
	_, _ = x.l.Exec(x.c, "ping", "-6", "-c", "2", "-i", "0.5", "-W", "2", "fd77::10")
	for _, c := range []struct {
		what string
		dst  netip.Addr
		want bool
	}{
		{"IPv4 beyond the exit node", x.lanIP, true},
		{"IPv6 beyond the exit node", netip.MustParseAddr("fd77::10"), true},
		{"another peer's IPv4 overlay address", peer4, false},
		{"another peer's IPv6 overlay address", peer6, false},
	} {
		if got := dial(c.dst); got != c.want {
			t.Errorf("%s (%s): connected %v, want %v", c.what, c.dst, got, c.want)
		}
	}
}
