//go:build linux

package nftfw

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/internal/netlab"
)

// lab: host a and host b on a direct link; b's eth0 stands for its
// WireGuard interface, with the firewall installed in b.
type lab struct {
	t          *testing.T
	l          *netlab.Lab
	nsA, nsB   string
	ipA, ipB   netip.Addr
	fw         *Firewall
	listenersB []net.Listener
}

func newLab(t *testing.T) *lab {
	l := netlab.New(t)
	x := &lab{t: t, l: l}
	x.nsA, x.nsB, x.ipA, x.ipB = l.Pair("a", "b")
	for _, port := range []string{"22", "80"} {
		x.listen(x.nsB, x.ipB, port)
	}
	x.listen(x.nsA, x.ipA, "5000")
	if err := netlab.Do(x.nsB, func() (err error) { x.fw, err = New("eth0"); return err }); err != nil {
		t.Skipf("nftables not usable here: %v", err)
	}
	t.Cleanup(func() { x.in(x.nsB, func() error { return x.fw.Close() }) })
	return x
}

func (x *lab) in(ns string, fn func() error) {
	x.t.Helper()
	if err := netlab.Do(ns, fn); err != nil {
		x.t.Fatal(err)
	}
}

// listen accepts TCP connections and writes "ok" on each.
func (x *lab) listen(ns string, ip netip.Addr, port string) {
	var ln net.Listener
	x.in(ns, func() (err error) { ln, err = net.Listen("tcp", net.JoinHostPort(ip.String(), port)); return err })
	x.t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("ok"))
			c.Close()
		}
	}()
}

// dial reports whether a TCP connection from ns to ip:port completes and
// carries the server's greeting.
func (x *lab) dial(ns string, ip netip.Addr, port string) bool {
	var c net.Conn
	err := netlab.Do(ns, func() (err error) {
		d := net.Dialer{Timeout: 700 * time.Millisecond}
		c, err = d.DialContext(context.Background(), "tcp", net.JoinHostPort(ip.String(), port))
		return err
	})
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b := make([]byte, 2)
	n, _ := c.Read(b)
	return string(b[:n]) == "ok"
}

func (x *lab) ping(ns string, ip netip.Addr) bool {
	_, err := x.l.Exec(ns, "ping", "-c", "1", "-W", "1", ip.String())
	return err == nil
}

func (x *lab) set(rules []acl.Rule, allowAll bool) {
	x.t.Helper()
	x.in(x.nsB, func() error { return x.fw.SetRules(rules, allowAll) })
}

func (x *lab) expect(what string, got, want bool) {
	x.t.Helper()
	if got != want {
		x.t.Errorf("%s: got %v, want %v", what, got, want)
	}
}

// TestRules: the acceptance case of the access-control issue on a real
// kernel: tcp/22 from a to b only; b's own connections to a and their
// replies pass; ICMP from a is dropped; rules change live; an outbound
// drop rule; closing removes everything.
func TestRules(t *testing.T) {
	x := newLab(t)
	// Before any map: everything passes (acl.New's behaviour).
	x.expect("a->b:80 before rules", x.dial(x.nsA, x.ipB, "80"), true)

	x.set([]acl.Rule{{Peer: x.ipA, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}}, false)
	x.expect("a->b:22", x.dial(x.nsA, x.ipB, "22"), true)
	x.expect("a->b:80", x.dial(x.nsA, x.ipB, "80"), false)
	x.expect("a pings b", x.ping(x.nsA, x.ipB), false)
	x.expect("b->a:5000 (b opens, replies come back)", x.dial(x.nsB, x.ipA, "5000"), true)
	x.expect("b pings a (the echo reply is a reply)", x.ping(x.nsB, x.ipA), true)

	// A port range and ICMP, for any peer.
	x.set([]acl.Rule{
		{Inbound: true, Accept: true, Proto: acl.ProtoAny, PortLo: 70, PortHi: 90},
		{Inbound: true, Accept: true, Proto: acl.ProtoICMP},
	}, false)
	x.expect("a->b:80 in 70-90", x.dial(x.nsA, x.ipB, "80"), true)
	x.expect("a->b:22 outside 70-90", x.dial(x.nsA, x.ipB, "22"), false)
	x.expect("a pings b with ICMP allowed", x.ping(x.nsA, x.ipB), true)

	// All-to-all with an inbound drop and an outbound drop.
	x.set([]acl.Rule{
		{Peer: x.ipA, Inbound: true, Accept: false, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80},
		{Peer: x.ipA, Inbound: false, Accept: false, Proto: acl.ProtoTCP, PortLo: 5000, PortHi: 5000},
	}, true)
	x.expect("a->b:22 allow-all", x.dial(x.nsA, x.ipB, "22"), true)
	x.expect("a->b:80 dropped", x.dial(x.nsA, x.ipB, "80"), false)
	x.expect("b->a:5000 dropped outbound", x.dial(x.nsB, x.ipA, "5000"), false)
	x.expect("a pings b allow-all", x.ping(x.nsA, x.ipB), true)

	// An IPv6 peer in a rule matches nothing and breaks nothing.
	x.set([]acl.Rule{{Peer: netip.MustParseAddr("fd00::1"), Inbound: true, Accept: true}}, false)
	x.expect("a->b:22 with only an IPv6 rule", x.dial(x.nsA, x.ipB, "22"), false)

	x.in(x.nsB, func() error { return x.fw.Close() })
	x.expect("a->b:80 after close", x.dial(x.nsA, x.ipB, "80"), true)
	x.in(x.nsB, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		ts, err := c.ListTables()
		if err != nil {
			return err
		}
		for _, tb := range ts {
			if tb.Name == x.fw.Table() {
				return errors.New("table still there after Close")
			}
		}
		return nil
	})
	// Close twice is fine (the cleanup does it again).
	x.in(x.nsB, func() error { return x.fw.Close() })
}

// TestOtherInterfacesUntouched: the firewall filters only its interface.
func TestOtherInterfacesUntouched(t *testing.T) {
	x := newLab(t)
	var fw *Firewall
	x.in(x.nsB, func() (err error) { fw, err = New("wt-other"); return err })
	x.in(x.nsB, func() error { return fw.SetRules(nil, false) }) // drop everything on wt-other
	defer x.in(x.nsB, func() error { return fw.Close() })
	x.expect("a->b:80 through eth0", x.dial(x.nsA, x.ipB, "80"), true)
	if out, err := exec.Command("ip", "netns", "exec", x.nsB, "nft", "list", "table", "inet", fw.Table()).CombinedOutput(); err == nil && !strings.Contains(string(out), "wt-other") {
		t.Errorf("table does not name its interface:\n%s", out)
	}
	if _, err := New(strings.Repeat("x", 20)); err == nil {
		t.Error("an interface name over IFNAMSIZ must be refused")
	}
}

// TestRoutedReplies is a client's side of a route: with the overlay set,
// a source outside it (a host on a routing peer's LAN) gets in only with
// replies to what this host opened, even under allow-all.
func TestRoutedReplies(t *testing.T) {
	x := newLab(t)
	x.in(x.nsB, func() error { return x.fw.SetOverlay(netip.MustParsePrefix("100.70.0.0/16")) })
	for _, allowAll := range []bool{true, false} {
		var rules []acl.Rule
		if !allowAll {
			rules = []acl.Rule{{Inbound: true, Accept: true, Proto: acl.ProtoTCP}} // any peer
		}
		x.set(rules, allowAll)
		x.expect("unsolicited a->b:80 from outside the overlay", x.dial(x.nsA, x.ipB, "80"), false)
		x.expect("b->a:5000, replies from outside the overlay", x.dial(x.nsB, x.ipA, "5000"), true)
		x.expect("b pings a", x.ping(x.nsB, x.ipA), true)
	}
	// The same source inside the overlay is a peer: the rules apply.
	x.in(x.nsB, func() error { return x.fw.SetOverlay(netip.PrefixFrom(x.ipA, 16)) })
	x.set(nil, true)
	x.expect("a->b:80 as a peer", x.dial(x.nsA, x.ipB, "80"), true)
}
