package forward

import (
	"context"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/client/nftfw"
	"github.com/wiremesh/wiremesh/internal/netlab"
)

// routedLab: a client host c, a routing host r and a LAN host l. The
// link c-r (interface "ov" in r) stands for the WireGuard interface and
// its overlay 100.70.0.0/16; r-l is r's LAN 192.168.77.0/24. l has no
// route to the overlay: only masquerade lets it answer c.
type routedLab struct {
	t          *testing.T
	l          *netlab.Lab
	c, r, lan  string
	cIP, lanIP netip.Addr
}

var (
	labOverlay  = netip.MustParsePrefix("100.70.0.0/16")
	labLAN      = netip.MustParsePrefix("192.168.77.0/24")
	labOverlays = []netip.Prefix{labOverlay}
)

func newRoutedLab(t *testing.T) *routedLab {
	l := netlab.New(t)
	x := &routedLab{t: t, l: l, c: l.NS("c"), r: l.NS("r"), lan: l.NS("l"),
		cIP: netip.MustParseAddr("100.70.0.2"), lanIP: netip.MustParseAddr("192.168.77.10")}
	for _, ns := range []string{x.c, x.r, x.lan} {
		x.sh("ip", "netns", "add", ns)
		x.sh("ip", "-n", ns, "link", "set", "lo", "up")
	}
	t.Cleanup(func() {
		for _, ns := range []string{x.c, x.r, x.lan} {
			_ = runQuiet("ip", "netns", "delete", ns)
		}
	})
	x.sh("ip", "link", "add", "eth0", "netns", x.c, "type", "veth", "peer", "name", "ov", "netns", x.r)
	x.sh("ip", "link", "add", "lan", "netns", x.r, "type", "veth", "peer", "name", "eth0", "netns", x.lan)
	x.sh("ip", "-n", x.c, "addr", "add", "100.70.0.2/16", "dev", "eth0")
	x.sh("ip", "-n", x.r, "addr", "add", "100.70.0.1/16", "dev", "ov")
	x.sh("ip", "-n", x.r, "addr", "add", "192.168.77.1/24", "dev", "lan")
	x.sh("ip", "-n", x.lan, "addr", "add", "192.168.77.10/24", "dev", "eth0")
	for _, l := range [][2]string{{x.c, "eth0"}, {x.r, "ov"}, {x.r, "lan"}, {x.lan, "eth0"}} {
		x.sh("ip", "-n", l[0], "link", "set", l[1], "up")
	}
	x.sh("ip", "-n", x.c, "route", "add", labLAN.String(), "via", "100.70.0.1")
	// A namespace starts with forwarding off: the test sees what we turn on.
	x.sh("ip", "netns", "exec", x.r, "sysctl", "-qw", "net.ipv4.ip_forward=0")
	for _, port := range []string{"80", "22"} {
		x.listen(port)
	}
	return x
}

func runQuiet(args ...string) error {
	_, err := execCommand(args...)
	return err
}

func (x *routedLab) sh(args ...string) {
	x.t.Helper()
	if out, err := execCommand(args...); err != nil {
		x.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (x *routedLab) in(ns string, fn func() error) {
	x.t.Helper()
	if err := netlab.Do(ns, fn); err != nil {
		x.t.Fatal(err)
	}
}

// listen answers each TCP connection on the LAN host with the address
// it came from, so the test sees whether it was masqueraded.
func (x *routedLab) listen(port string) {
	var ln net.Listener
	x.in(x.lan, func() (err error) { ln, err = net.Listen("tcp", net.JoinHostPort(x.lanIP.String(), port)); return err })
	x.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			_, _ = c.Write([]byte(ap.Addr().String()))
			c.Close()
		}
	}()
}

// dial connects from c to the LAN host's port and returns the source
// address the LAN host saw ("" when the connection failed).
func (x *routedLab) dial(port string) string {
	var c net.Conn
	err := netlab.Do(x.c, func() (err error) {
		d := net.Dialer{Timeout: 700 * time.Millisecond}
		c, err = d.DialContext(context.Background(), "tcp", net.JoinHostPort(x.lanIP.String(), port))
		return err
	})
	if err != nil {
		return ""
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, 64)
	n, _ := c.Read(b)
	return string(b[:n])
}

func (x *routedLab) sysctl() string {
	out, err := x.l.Exec(x.r, "sysctl", "-n", "net.ipv4.ip_forward")
	if err != nil {
		x.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// tables lists the names of r's nftables tables.
func (x *routedLab) tables() string {
	var names []string
	x.in(x.r, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		ts, err := c.ListTables()
		for _, tb := range ts {
			names = append(names, tb.Name)
		}
		return err
	})
	return strings.Join(names, " ")
}

func (x *routedLab) expect(what, got, want string) {
	x.t.Helper()
	if got != want {
		x.t.Errorf("%s: got %q, want %q", what, got, want)
	}
}

// TestRoutingPeer: the routing host forwards from the overlay to its LAN
// with masquerade on and off, enforces route rules by port and source,
// and restores everything on Close and after a crash.
func TestRoutingPeer(t *testing.T) {
	x := newRoutedLab(t)
	dir := t.TempDir()
	var fw *nftfw.Firewall
	var fwd *Forwarder
	x.in(x.r, func() (err error) {
		if fw, err = nftfw.New("ov"); err != nil {
			return err
		}
		fwd, err = New(Options{StateDir: dir, Interface: "ov"})
		return err
	})
	t.Cleanup(func() {
		_ = netlab.Do(x.r, func() error { _ = fwd.Close(); return fw.Close() })
	})
	x.in(x.r, func() error { return fw.SetOverlay(labOverlay) })
	x.expect("before routes", x.dial("80"), "")

	// Masquerade on, legacy allow all.
	x.in(x.r, func() error {
		if err := fwd.Apply(labOverlays, []Route{{Network: labLAN, Masquerade: true}}); err != nil {
			return err
		}
		return fw.SetRouting(acl.Routing{Networks: []netip.Prefix{labLAN}, AllowAll: true})
	})
	x.expect("ip_forward while routing", x.sysctl(), "1")
	x.expect("masqueraded :80", x.dial("80"), "192.168.77.1")
	x.expect("masqueraded :22", x.dial("22"), "192.168.77.1")

	// Rules: tcp/80 from c only; default deny.
	x.in(x.r, func() error {
		return fw.SetRouting(acl.Routing{Networks: []netip.Prefix{labLAN}, Rules: []acl.RouteRule{{
			Sources: []netip.Prefix{netip.PrefixFrom(x.cIP, 32)}, Dests: []netip.Prefix{labLAN},
			Accept: true, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80}}})
	})
	x.expect("rule allows :80", x.dial("80"), "192.168.77.1")
	x.expect("rule denies :22", x.dial("22"), "")
	x.in(x.r, func() error {
		return fw.SetRouting(acl.Routing{Networks: []netip.Prefix{labLAN}, Rules: []acl.RouteRule{{
			Sources: []netip.Prefix{netip.MustParsePrefix("100.70.9.0/24")}, Dests: []netip.Prefix{labLAN}, Accept: true}}})
	})
	x.expect("rule for other sources denies :80", x.dial("80"), "")

	// Masquerade off: the LAN host sees the overlay address, and answers
	// only once it has a route back.
	x.in(x.r, func() error {
		if err := fwd.Apply(labOverlays, []Route{{Network: labLAN}}); err != nil {
			return err
		}
		return fw.SetRouting(acl.Routing{Networks: []netip.Prefix{labLAN}, AllowAll: true})
	})
	if strings.Contains(x.tables(), nftfw.NATTable("ov")) {
		t.Error("NAT table still there with masquerade off")
	}
	x.expect("no masquerade, no route back", x.dial("80"), "")
	x.sh("ip", "-n", x.lan, "route", "add", labOverlay.String(), "via", "192.168.77.1")
	x.expect("no masquerade, route back", x.dial("80"), x.cIP.String())

	// Close restores the sysctl and removes the NAT table.
	x.in(x.r, func() error { return fwd.Apply(labOverlays, []Route{{Network: labLAN, Masquerade: true}}) })
	x.in(x.r, func() error { return fwd.Close() })
	x.expect("ip_forward after Close", x.sysctl(), "0")
	if strings.Contains(x.tables(), nftfw.NATTable("ov")) {
		t.Error("NAT table left after Close")
	}
	if _, err := os.Stat(dir + "/forward-ov.json"); err == nil {
		t.Error("state file left after Close")
	}
	x.expect("after Close", x.dial("80"), "")

	// A crash (no Close) while routing with masquerade; the next run's
	// New restores the host.
	var crashed *Forwarder
	x.in(x.r, func() (err error) {
		if crashed, err = New(Options{StateDir: dir, Interface: "ov"}); err != nil {
			return err
		}
		return crashed.Apply(labOverlays, []Route{{Network: labLAN, Masquerade: true}})
	})
	x.expect("ip_forward in the crashed run", x.sysctl(), "1")
	if !strings.Contains(x.tables(), nftfw.NATTable("ov")) {
		t.Fatal("no NAT table in the crashed run")
	}
	x.in(x.r, func() (err error) { fwd, err = New(Options{StateDir: dir, Interface: "ov"}); return err })
	x.expect("ip_forward after restart", x.sysctl(), "0")
	if strings.Contains(x.tables(), nftfw.NATTable("ov")) {
		t.Error("crashed run's NAT table left after restart")
	}
	// The filter table a crashed run left is replaced whole by the next
	// one's, which forwards nothing before its first map.
	x.in(x.r, func() (err error) { fw, err = nftfw.New("ov"); return err })
	x.in(x.r, func() error { return fwd.Apply(labOverlays, []Route{{Network: labLAN}}) })
	x.expect("new run before its map", x.dial("80"), "")
}

// TestRoutingPeerIPv6: route rules for an IPv6 network (an IPv6 route
// or exit node) in the forward chain.
func TestRoutingPeerIPv6(t *testing.T) {
	x := newRoutedLab(t)
	lan6 := netip.MustParsePrefix("fd77::/64")
	x.sh("ip", "-n", x.c, "addr", "add", "fd70::2/64", "dev", "eth0", "nodad")
	x.sh("ip", "-n", x.r, "addr", "add", "fd70::1/64", "dev", "ov", "nodad")
	x.sh("ip", "-n", x.r, "addr", "add", "fd77::1/64", "dev", "lan", "nodad")
	x.sh("ip", "-n", x.lan, "addr", "add", "fd77::10/64", "dev", "eth0", "nodad")
	x.sh("ip", "-n", x.c, "route", "add", "fd77::/64", "via", "fd70::1")
	x.sh("ip", "-n", x.lan, "route", "add", "fd70::/64", "via", "fd77::1")
	x.sh("ip", "netns", "exec", x.r, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=0")
	lanHost := netip.MustParseAddr("fd77::10")
	var ln net.Listener
	x.in(x.lan, func() (err error) { ln, err = net.Listen("tcp", "[fd77::10]:0"); return err })
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			ap, _ := netip.ParseAddrPort(c.RemoteAddr().String())
			_, _ = c.Write([]byte(ap.Addr().String()))
			c.Close()
		}
	}()
	port := uint16(ln.Addr().(*net.TCPAddr).Port)
	// from connects and returns the source the LAN host saw ("": refused).
	from := func() string {
		var c net.Conn
		err := netlab.Do(x.c, func() (err error) {
			d := net.Dialer{Timeout: 700 * time.Millisecond}
			c, err = d.DialContext(context.Background(), "tcp", netip.AddrPortFrom(lanHost, port).String())
			return err
		})
		if err != nil {
			return ""
		}
		defer c.Close()
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		b := make([]byte, 64)
		n, _ := c.Read(b)
		return string(b[:n])
	}
	dial := func() bool { return from() != "" }
	var fw *nftfw.Firewall
	var fwd *Forwarder
	x.in(x.r, func() (err error) {
		if fw, err = nftfw.New("ov"); err != nil {
			return err
		}
		fwd, err = New(Options{Interface: "ov"})
		return err
	})
	t.Cleanup(func() { _ = netlab.Do(x.r, func() error { _ = fwd.Close(); return fw.Close() }) })
	x.in(x.r, func() error { return fwd.Apply(labOverlays, []Route{{Network: lan6}}) })
	out, _ := x.l.Exec(x.r, "sysctl", "-n", "net.ipv6.conf.all.forwarding")
	x.expect("IPv6 forwarding while routing", strings.TrimSpace(out), "1")
	rule := func(src string, lo, hi uint16) {
		x.in(x.r, func() error {
			return fw.SetRouting(acl.Routing{Networks: []netip.Prefix{lan6}, Rules: []acl.RouteRule{{
				Sources: []netip.Prefix{netip.MustParsePrefix(src)}, Dests: []netip.Prefix{lan6}, Accept: true, Proto: acl.ProtoTCP, PortLo: lo, PortHi: hi}}})
		})
	}
	// Neighbour discovery on the veths takes about a second the first
	// time: done here, under allow-all, so the dials below see the rules.
	x.in(x.r, func() error { return fw.SetRouting(acl.Routing{Networks: []netip.Prefix{lan6}, AllowAll: true}) })
	if _, err := x.l.Exec(x.c, "ping", "-6", "-c", "3", "-i", "0.5", "-W", "2", lanHost.String()); err != nil {
		t.Fatalf("IPv6 path under allow-all: %v", err)
	}
	rule("fd70::2/128", port, port)
	if !dial() {
		t.Error("allowed IPv6 flow refused")
	}
	rule("fd70::2/128", port+1, port+1)
	if dial() {
		t.Error("IPv6 flow to another port accepted")
	}
	rule("fd70::9/128", port, port)
	if dial() {
		t.Error("IPv6 flow from another source accepted")
	}
	rule("fd70::2/128", port, port)
	x.expect("IPv6 without masquerade", from(), "fd70::2")

	// Masquerade from the IPv6 overlay (the agent's dual-stack case): the
	// LAN host sees the routing host and needs no route back.
	x.sh("ip", "-n", x.lan, "route", "del", "fd70::/64", "via", "fd77::1")
	x.expect("IPv6 without masquerade or a route back", from(), "")
	overlays := []netip.Prefix{labOverlay, netip.MustParsePrefix("fd70::/64")}
	x.in(x.r, func() error {
		return fwd.Apply(overlays, []Route{{Network: labLAN, Masquerade: true}, {Network: lan6, Masquerade: true}})
	})
	x.expect("IPv6 masqueraded", from(), "fd77::1")
	x.expect("IPv4 while the filter routes only IPv6", x.dial("80"), "")
	x.in(x.r, func() error {
		return fw.SetRouting(acl.Routing{Networks: []netip.Prefix{labLAN, lan6}, AllowAll: true})
	})
	x.expect("IPv4 masqueraded beside it", x.dial("80"), "192.168.77.1")
	x.expect("IPv6 masqueraded, allow-all", from(), "fd77::1")
	x.in(x.r, func() error { return fwd.Close() })
	out, _ = x.l.Exec(x.r, "sysctl", "-n", "net.ipv6.conf.all.forwarding")
	x.expect("IPv6 forwarding after Close", strings.TrimSpace(out), "0")
	if strings.Contains(x.tables(), nftfw.NATTable("ov")) {
		t.Error("NAT table left after Close")
	}
}
