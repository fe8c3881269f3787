// Package netlab builds test networks out of Linux network namespaces: a
// public segment for servers and NATed sites behind routers modelled on
// real ones (home router, symmetric NAT, a NAT box without an input
// firewall). Every namespace is named with a per-run prefix and removed in
// test cleanup, also when the test fails. Tests using it need root and skip
// without it.
package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// NAT kinds.
type NAT int

const (
	// Home is MASQUERADE (endpoint-independent mapping) with a stateful
	// firewall dropping unsolicited packets, forwarded or to the router.
	Home NAT = iota
	// Symmetric gives a new port per destination (random-fully) and drops
	// unsolicited inbound UDP: only a relay connects it.
	Symmetric
	// OpenBox is MASQUERADE without an input firewall: it accepts packets
	// to its own WAN address (the hard case of TESTBED.md).
	OpenBox
)

// Lab is one test network.
type Lab struct {
	t      testing.TB
	Prefix string
	nss    []string
	sites  int
}

// PubAddr is the servers' address on the public segment.
const PubAddr = "10.200.0.1"

// ResolvConf is every namespace's resolv.conf when the lab starts: the
// name server is on the public segment (a test may serve DNS there).
const ResolvConf = "# netlab\nsearch lab.test\nnameserver " + PubAddr + "\noptions timeout:1\n"

// Require skips the test unless it can build namespaces.
func Require(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespace tests need root")
	}
	for _, tool := range []string{"ip", "iptables", "ping"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (bash scripts/deps.sh installs it)", tool)
		}
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun")
	}
}

// New creates the public namespace with a bridge holding PubAddr.
func New(t testing.TB) *Lab {
	t.Helper()
	Require(t)
	b := make([]byte, 2)
	_, _ = rand.Read(b)
	l := &Lab{t: t, Prefix: "w" + hex.EncodeToString(b)}
	t.Cleanup(l.Close)
	pub := l.addNS("pub")
	// A fixed address: a bridge otherwise takes the lowest of its ports'
	// addresses, so a site added later could change the MAC the routers
	// already resolved the servers' addresses to.
	l.must("ip", "-n", pub, "link", "add", "br0", "address", "02:00:0a:c8:00:01", "type", "bridge")
	l.must("ip", "-n", pub, "addr", "add", PubAddr+"/24", "dev", "br0")
	l.must("ip", "-n", pub, "link", "set", "br0", "up")
	return l
}

// NS returns the full namespace name of a lab host.
func (l *Lab) NS(name string) string { return l.Prefix + "-" + name }

func (l *Lab) addNS(name string) string {
	ns := l.NS(name)
	l.must("ip", "netns", "add", ns)
	l.nss = append(l.nss, ns)
	// Its own resolv.conf (ip netns exec bind-mounts it over the host's):
	// an agent's DNS manager in the namespace rewrites this one, never the
	// host's.
	dir := filepath.Join("/etc/netns", ns)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "resolv.conf"), []byte(ResolvConf), 0o644); err != nil {
		l.t.Fatal(err)
	}
	// Its own hosts file too: an agent whose last resort is the hosts
	// file edits the namespace's copy, never the host's. A test may have
	// written one for the namespace already (names of its servers): keep it.
	if _, err := os.Stat(filepath.Join(dir, "hosts")); errors.Is(err, os.ErrNotExist) {
		hosts, _ := os.ReadFile("/etc/hosts")
		if err := os.WriteFile(filepath.Join(dir, "hosts"), hosts, 0o644); err != nil {
			l.t.Fatal(err)
		}
	}
	l.must("ip", "-n", ns, "link", "set", "lo", "up")
	return ns
}

// Close removes every namespace (and with them their links).
func (l *Lab) Close() {
	for i := len(l.nss) - 1; i >= 0; i-- {
		_ = exec.Command("ip", "netns", "delete", l.nss[i]).Run()
		_ = os.RemoveAll(filepath.Join("/etc/netns", l.nss[i]))
	}
	l.nss = nil
}

func (l *Lab) must(args ...string) {
	l.t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Exec runs a command inside a namespace and returns its output.
func (l *Lab) Exec(ns string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
	return string(out), err
}

// Cmd prepares a command to run inside a namespace.
func (l *Lab) Cmd(ns string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
}

// Pair adds two hosts joined by a direct link (eth0 on both, no NAT) and
// returns their namespaces and addresses.
func (l *Lab) Pair(name1, name2 string) (ns1, ns2 string, addr1, addr2 netip.Addr) {
	l.t.Helper()
	l.sites++
	n := l.sites
	ns1, ns2 = l.addNS(name1), l.addNS(name2)
	addr1, addr2 = netip.AddrFrom4([4]byte{10, 200, byte(n), 1}), netip.AddrFrom4([4]byte{10, 200, byte(n), 2})
	l.must("ip", "link", "add", "eth0", "netns", ns1, "type", "veth", "peer", "name", "eth0", "netns", ns2)
	for _, h := range []struct {
		ns   string
		addr netip.Addr
	}{{ns1, addr1}, {ns2, addr2}} {
		l.must("ip", "-n", h.ns, "addr", "add", h.addr.String()+"/24", "dev", "eth0")
		l.must("ip", "-n", h.ns, "link", "set", "eth0", "up")
	}
	return ns1, ns2, addr1, addr2
}

// Site adds a router of the given kind on the public segment and one host
// behind it; it returns the host's namespace and LAN address.
func (l *Lab) Site(name string, kind NAT) (hostNS, hostAddr string) {
	l.t.Helper()
	l.sites++
	n := l.sites
	pub, r, h := l.NS("pub"), l.addNS(name+"r"), l.addNS(name)
	wan := fmt.Sprintf("10.200.0.%d", 10+n)
	lanR, lanH := fmt.Sprintf("10.200.%d.1", n), fmt.Sprintf("10.200.%d.2", n)
	// router <-> public bridge
	pw := fmt.Sprintf("%sp%d", l.Prefix, n)
	l.must("ip", "link", "add", pw, "netns", pub, "type", "veth", "peer", "name", "wan", "netns", r)
	l.must("ip", "-n", pub, "link", "set", pw, "master", "br0", "up")
	l.must("ip", "-n", r, "addr", "add", wan+"/24", "dev", "wan")
	l.must("ip", "-n", r, "link", "set", "wan", "up")
	// host <-> router
	l.must("ip", "link", "add", "lan", "netns", r, "type", "veth", "peer", "name", "eth0", "netns", h)
	l.must("ip", "-n", r, "addr", "add", lanR+"/24", "dev", "lan")
	l.must("ip", "-n", r, "link", "set", "lan", "up")
	l.must("ip", "-n", h, "addr", "add", lanH+"/24", "dev", "eth0")
	l.must("ip", "-n", h, "link", "set", "eth0", "up")
	l.must("ip", "-n", h, "route", "add", "default", "via", lanR)
	l.must("ip", "netns", "exec", r, "sysctl", "-qw", "net.ipv4.ip_forward=1")
	ipt := func(args ...string) { l.must(append([]string{"ip", "netns", "exec", r, "iptables"}, args...)...) }
	switch kind {
	case Home, OpenBox:
		ipt("-t", "nat", "-A", "POSTROUTING", "-o", "wan", "-j", "MASQUERADE")
	case Symmetric:
		ipt("-t", "nat", "-A", "POSTROUTING", "-o", "wan", "-j", "MASQUERADE", "--random-fully")
	}
	// Forwarding: replies and LAN-originated flows only.
	ipt("-P", "FORWARD", "DROP")
	ipt("-A", "FORWARD", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
	ipt("-A", "FORWARD", "-i", "lan", "-o", "wan", "-j", "ACCEPT")
	if kind != OpenBox {
		ipt("-P", "INPUT", "DROP")
		ipt("-A", "INPUT", "-i", "lo", "-j", "ACCEPT")
		ipt("-A", "INPUT", "-m", "conntrack", "--ctstate", "ESTABLISHED,RELATED", "-j", "ACCEPT")
		ipt("-A", "INPUT", "-i", "lan", "-j", "ACCEPT")
	}
	return h, lanH
}

// Do runs fn with the calling goroutine's thread inside namespace ns, so
// that sockets fn creates live there (they stay there afterwards).
func Do(ns string, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return err
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		return err
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return fmt.Errorf("setns %s: %w", ns, err)
	}
	defer func() {
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			panic(fmt.Sprintf("netlab: cannot return to the original namespace: %v", err))
		}
	}()
	return fn()
}

// LAN adds a private network (10.210.N.0/24, a bridge in its own
// namespace holding the LAN host at .100) that the given gateway
// namespaces are attached to, gateway i at .i+1 on their interface "lan0":
// the network that routing peers serve. The LAN host has no route to
// anywhere else, so it answers only masqueraded traffic (or traffic to
// prefixes a test routes through a gateway with Route).
func (l *Lab) LAN(name string, gateways ...string) (hostNS string, host netip.Prefix, gws []netip.Addr) {
	l.t.Helper()
	l.sites++
	n := l.sites
	hostNS = l.addNS(name)
	host = netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 210, byte(n), 100}), 24)
	l.must("ip", "-n", hostNS, "link", "add", "br0", "type", "bridge")
	l.must("ip", "-n", hostNS, "addr", "add", host.String(), "dev", "br0")
	l.must("ip", "-n", hostNS, "link", "set", "br0", "up")
	for i, gw := range gateways {
		addr := netip.AddrFrom4([4]byte{10, 210, byte(n), byte(i + 1)})
		port := fmt.Sprintf("gw%d", i)
		l.must("ip", "link", "add", "lan0", "netns", gw, "type", "veth", "peer", "name", port, "netns", hostNS)
		l.must("ip", "-n", hostNS, "link", "set", port, "master", "br0", "up")
		l.must("ip", "-n", gw, "addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", "lan0")
		l.must("ip", "-n", gw, "link", "set", "lan0", "up")
		gws = append(gws, addr)
	}
	return hostNS, host, gws
}

// Route adds a route in namespace ns (e.g. the LAN host's way back to the
// overlay through a gateway when the routing peer does not masquerade).
func (l *Lab) Route(ns string, to netip.Prefix, via netip.Addr) {
	l.t.Helper()
	l.must("ip", "-n", ns, "route", "replace", to.String(), "via", via.String())
}

// Internet adds a host on the public segment at 10.200.0.N (the
// "internet" an exit node leads to) and returns its namespace and address.
func (l *Lab) Internet(name string) (ns string, addr netip.Addr) {
	l.t.Helper()
	l.sites++
	n := l.sites
	ns = l.addNS(name)
	addr = netip.AddrFrom4([4]byte{10, 200, 0, byte(100 + n)})
	pw := fmt.Sprintf("%si%d", l.Prefix, n)
	l.must("ip", "link", "add", pw, "netns", l.NS("pub"), "type", "veth", "peer", "name", "eth0", "netns", ns)
	l.must("ip", "-n", l.NS("pub"), "link", "set", pw, "master", "br0", "up")
	l.must("ip", "-n", ns, "addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", "eth0")
	l.must("ip", "-n", ns, "link", "set", "eth0", "up")
	return ns, addr
}
