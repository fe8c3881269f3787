package e2e

import (
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// The IPv6 overlay between agents: management gives each peer of the
// account's IPv6 groups (a new account: All) that announces the
// IPv6Overlay capability an address in the account's ULA /64; the agents
// put it on their interfaces, route each other's /128 through WireGuard
// and filter IPv6 with the same policies as IPv4.

// status6 is the IPv6 part of `netbird status --json`.
type status6 struct {
	NetbirdIP   string `json:"netbirdIp"`
	NetbirdIPv6 string `json:"netbirdIpv6"`
	Peers       struct {
		Details []struct {
			FQDN        string `json:"fqdn"`
			NetbirdIP   string `json:"netbirdIp"`
			NetbirdIPv6 string `json:"netbirdIpv6"`
		} `json:"details"`
	} `json:"peers"`
}

func (m *Mesh) status6(t *testing.T, a *Agent) status6 {
	t.Helper()
	out, err := m.CLI(a, "status", "--json")
	if err != nil {
		t.Fatalf("%s status: %v\n%s", a.Name, err, out)
	}
	var s status6
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%s status json: %v\n%s", a.Name, err, out)
	}
	return s
}

// peer6 is the IPv6 address a's status shows for the peer whose IPv4
// address is ip4 ("" when none), and whether a lists that peer at all.
func (s status6) peer6(ip4 string) (string, bool) {
	for _, p := range s.Peers.Details {
		if p.NetbirdIP == ip4 {
			return p.NetbirdIPv6, true
		}
	}
	return "", false
}

// waitPing6 pings over IPv6 until a reply or the deadline.
func waitPing6(m *Mesh, from *Agent, ip string, within time.Duration) (time.Duration, bool) {
	start := time.Now()
	for time.Since(start) < within {
		if ping6(m, from, ip) {
			return time.Since(start), true
		}
	}
	return time.Since(start), false
}

// TestIPv6Overlay: a and b (ours) get IPv6 overlay addresses, shown in
// their status; with the Default policy off and a policy allowing ICMP
// and tcp/80 inside a group of a, b and c, a and b ping each other over
// IPv6 and connect on tcp/80 (the server sees a's IPv6 overlay address),
// while tcp/22 is dropped over IPv6 as over IPv4. c, up with
// --disable-ipv6, has no IPv6 address and the others have no /128 for it,
// though it stays reachable over IPv4.
func TestIPv6Overlay(t *testing.T) { ipv6Overlay(t, NewMesh(t)) }

// TestIPv6OverlayNftables: the same with the rules in nftables on the
// interface (NB_FIREWALL=nftables) instead of the userspace filter.
func TestIPv6OverlayNftables(t *testing.T) {
	m := NewMesh(t)
	m.AgentEnv = []string{"NB_FIREWALL=nftables"}
	ipv6Overlay(t, m)
}

func ipv6Overlay(t *testing.T, m *Mesh) {
	a, b, c := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home), m.Agent("c", netlab.Home)
	m.Up(a)
	m.Up(b)
	if out, err := m.UpAt(c, "http://"+netlab.PubAddr+":"+mgmtPort, m.Key, "--disable-ipv6"); err != nil || !strings.Contains(out, "Connected") {
		t.Fatalf("c: netbird up --disable-ipv6: %v\n%s", err, out)
	}
	a6, b6 := overlay6Of(t, m, a, 20*time.Second), overlay6Of(t, m, b, 20*time.Second)
	ipA, ipB, ipC := IPOf(m.Status(a)), IPOf(m.Status(b)), IPOf(m.Status(c))
	t.Logf("a %s %s, b %s %s, c %s", ipA, a6, ipB, b6, ipC)

	// Status: the own address with its prefix length, peers' without.
	sa := m.status6(t, a)
	if p, err := netip.ParsePrefix(sa.NetbirdIPv6); err != nil || p.Addr() != a6 || !p.Contains(b6) {
		t.Errorf("a's status netbirdIpv6 = %q, want %s in a prefix holding %s", sa.NetbirdIPv6, a6, b6)
	}
	if out, err := m.CLI(a, "status", "-6"); err != nil || strings.TrimSpace(out) != a6.String() {
		t.Errorf("a: status -6 = %q, %v; want %s", out, err, a6)
	}
	for within := time.Now().Add(15 * time.Second); ; time.Sleep(300 * time.Millisecond) {
		got, _ := m.status6(t, a).peer6(ipB)
		if got == b6.String() {
			break
		}
		if time.Now().After(within) {
			t.Fatalf("a's status shows b's IPv6 as %q, want %s", got, b6)
		}
	}

	// c: no address, no /128 at the others, IPv4 as usual.
	if out, _ := m.Lab.Exec(c.NS, "ip", "-6", "-o", "addr", "show", "dev", c.Iface, "scope", "global"); strings.TrimSpace(out) != "" {
		t.Errorf("c (--disable-ipv6) has a global IPv6 address:\n%s", out)
	}
	if s := m.status6(t, c); s.NetbirdIPv6 != "" {
		t.Errorf("c (--disable-ipv6) shows netbirdIpv6 %q", s.NetbirdIPv6)
	}
	if got, listed := m.status6(t, a).peer6(ipC); !listed || got != "" {
		t.Errorf("a's view of c: listed %v, IPv6 %q; want listed without IPv6", listed, got)
	}

	// DNS: AAAA records for peers on the IPv6 overlay, served to peers on
	// it only (c, without IPv6, gets none, and none exists for c).
	noAnswer := func(d digAnswer) bool { return d.Rcode == "NOERROR" && len(d.Answers) == 0 }
	if d, _, ok := m.waitDig(a, "", "b.netbird.selfhosted", "AAAA", 10*time.Second, func(d digAnswer) bool { return d.is(b6.String()) }); !ok {
		t.Errorf("a: AAAA b.netbird.selfhosted = %+v, want %s", d, b6)
	}
	if d, _, ok := m.waitDig(a, "", "c.netbird.selfhosted", "AAAA", 5*time.Second, noAnswer); !ok {
		t.Errorf("a: AAAA c.netbird.selfhosted (--disable-ipv6) = %+v, want an empty answer", d)
	}
	if d, _, ok := m.waitDig(c, "", "a.netbird.selfhosted", "AAAA", 5*time.Second, noAnswer); !ok {
		t.Errorf("c (--disable-ipv6): AAAA a.netbird.selfhosted = %+v, want an empty answer", d)
	}
	if d, _, ok := m.waitDig(c, "", "a.netbird.selfhosted", "A", 5*time.Second, func(d digAnswer) bool { return d.is(ipA) }); !ok {
		t.Errorf("c: A a.netbird.selfhosted = %+v, want %s", d, ipA)
	}

	// Default policy under All: IPv6 flows both ways.
	for _, p := range []struct {
		from *Agent
		to   netip.Addr
	}{{a, b6}, {b, a6}} {
		if d, ok := waitPing6(m, p.from, p.to.String(), 30*time.Second); !ok {
			t.Fatalf("%s cannot ping6 %s:\n%s\n%s", p.from.Name, p.to, m.debugRoutes(a), m.debugRoutes(b))
		} else {
			t.Logf("%s -> %s over IPv6: first reply after %v", p.from.Name, p.to, d.Round(time.Millisecond))
		}
	}

	// Policy: ICMP and tcp/80 inside {a, b, c}, Default off.
	admin := func(args ...string) string {
		t.Helper()
		out, err := m.Admin(args...)
		if err != nil {
			t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	var ps []struct{ ID, Name string }
	_ = json.Unmarshal([]byte(admin("peers", "list", "--json")), &ps)
	ids := map[string]string{}
	for _, p := range ps {
		ids[p.Name] = p.ID
	}
	admin("groups", "create", "V6", ids["a"], ids["b"], ids["c"])
	admin("policies", "create", "--name", "icmp", "--source", "V6", "--destination", "V6", "--protocol", "icmp")
	admin("policies", "create", "--name", "web", "--source", "V6", "--destination", "V6", "--protocol", "tcp", "--ports", "80")
	var pols []struct{ ID, Name string }
	_ = json.Unmarshal([]byte(admin("policies", "list", "--json")), &pols)
	for _, p := range pols {
		if p.Name == "Default" {
			admin("policies", "disable", p.ID)
		}
	}
	whoami6(t, b.NS, b6.String(), 80)
	whoami6(t, b.NS, b6.String(), 22)
	whoami6(t, a.NS, a6.String(), 80)
	// Enforced once tcp/22 stops answering over IPv6.
	for within := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := askWho6(a, b6.String(), 22); err != nil {
			break
		}
		if time.Now().After(within) {
			t.Fatalf("a -> b [%s]:22 still open over IPv6 15 s after the policy change", b6)
		}
	}
	if got, err := askWho6(a, b6.String(), 80); err != nil || got != a6.String() {
		t.Errorf("a -> b [%s]:80 over IPv6: %q, %v; want the server to see %s", b6, got, err, a6)
	}
	if got, err := askWho6(b, a6.String(), 80); err != nil || got != b6.String() {
		t.Errorf("b -> a [%s]:80 over IPv6: %q, %v; want the server to see %s", a6, got, err, b6)
	}
	for _, p := range []struct {
		from *Agent
		to   netip.Addr
	}{{a, b6}, {b, a6}} {
		if _, ok := waitPing6(m, p.from, p.to.String(), 5*time.Second); !ok {
			t.Errorf("%s cannot ping6 %s under the ICMP policy", p.from.Name, p.to)
		}
	}
	if _, err := askWho6(a, b6.String(), 22); err == nil {
		t.Errorf("a -> b [%s]:22 over IPv6 passes; the policy allows only tcp/80 and ICMP", b6)
	}
	if _, ok := m.WaitPing(a, ipC, 10*time.Second); !ok {
		t.Errorf("a cannot ping c (--disable-ipv6) over IPv4")
	}
	for _, x := range []struct {
		a    *Agent
		want string
	}{{a, "IPv6: on\n"}, {c, "IPv6: disabled (--disable-ipv6)\n"}} {
		if out, err := m.CLI(x.a, "status", "-d"); err != nil || !strings.Contains(out, x.want) {
			t.Errorf("%s: status -d lacks %q: %v\n%s", x.a.Name, x.want, err, out)
		}
	}

	// A new IPv6 range: management moves every address; the agents
	// replace theirs in place and IPv6 flows again, IPv4 unbroken.
	listen(t, b, ipB, 80)
	open4, err := dial(a, ipB, 80)
	if err != nil {
		t.Fatalf("a -> b:80 over IPv4: %v", err)
	}
	defer open4.Close()
	newRange := netip.MustParsePrefix("fd12:3456:789a:1::/64")
	setAccountSetting(t, m.adminOf(t), "network_range_v6", newRange.String())
	moved := func(x *Agent) netip.Addr {
		t.Helper()
		for within := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			out, _ := m.Lab.Exec(x.NS, "ip", "-6", "-o", "addr", "show", "dev", x.Iface, "scope", "global")
			var in []netip.Addr
			for _, f := range strings.Fields(out) {
				if p, err := netip.ParsePrefix(f); err == nil && p.Addr().Is6() {
					in = append(in, p.Addr())
				}
			}
			if len(in) == 1 && newRange.Contains(in[0]) {
				return in[0]
			}
			if time.Now().After(within) {
				t.Fatalf("%s: IPv6 addresses %v 20 s after the range moved to %s", x.Name, in, newRange)
			}
		}
	}
	na6, nb6 := moved(a), moved(b)
	if d, ok := waitPing6(m, a, nb6.String(), 20*time.Second); !ok {
		t.Errorf("a cannot ping6 b at its new address %s", nb6)
	} else {
		t.Logf("a -> b at %s: first reply %v after both moved", nb6, d.Round(time.Millisecond))
	}
	if _, ok := waitPing6(m, b, na6.String(), 10*time.Second); !ok {
		t.Errorf("b cannot ping6 a at its new address %s", na6)
	}
	if !echoes(open4) {
		t.Error("the IPv4 connection a -> b:80 opened before the move did not survive it (the engine restarted?)")
	}
}

// TestOfficialClientIPv6: our agent and an official NetBird v0.77.1
// client get IPv6 overlay addresses from our server and ping each other
// over IPv6; each shows the other's IPv6 address.
func TestOfficialClientIPv6(t *testing.T) {
	bin := officialClient(t)
	m := NewMesh(t)
	ours := m.Agent("a", netlab.Home)
	o := m.AgentOf(bin, "o", netlab.Home)
	m.Up(ours)
	if out, err := m.CLI(o, "up", "-m", "http://"+netlab.PubAddr+":"+mgmtPort, "-k", m.Key, "-n", o.Name, "--interface-name", o.Iface); err != nil {
		t.Fatalf("official up: %v\n%s\n%s", err, out, o.Daemon.Output())
	}
	a6, o6 := overlay6Of(t, m, ours, 20*time.Second), overlay6Of(t, m, o, 20*time.Second)
	t.Logf("ours %s, official %s", a6, o6)
	for _, p := range []struct {
		from *Agent
		to   netip.Addr
	}{{ours, o6}, {o, a6}} {
		if d, ok := waitPing6(m, p.from, p.to.String(), 30*time.Second); !ok {
			st, _ := m.CLI(o, "status", "-d")
			t.Fatalf("%s cannot ping6 %s\n--- official status:\n%s\n--- official log:\n%s\n--- ours:\n%s", p.from.Name, p.to, st, tail(o.Daemon.Output()), tail(ours.Daemon.Output()))
		} else {
			t.Logf("%s -> %s over IPv6: first reply after %v", p.from.Name, p.to, d.Round(time.Millisecond))
		}
	}
	whoami6(t, o.NS, o6.String(), 8080)
	if got, err := askWho6(ours, o6.String(), 8080); err != nil || got != a6.String() {
		t.Errorf("ours -> official [%s]:8080: %q, %v; want the server to see %s", o6, got, err, a6)
	}
	// Each resolves the other's name to its IPv6 address.
	if d, _, ok := m.waitDig(o, "", "a.netbird.selfhosted", "AAAA", 10*time.Second, func(d digAnswer) bool { return d.is(a6.String()) }); !ok {
		t.Errorf("official: AAAA a.netbird.selfhosted = %+v, want %s", d, a6)
	}
	ipO := IPOf(m.Status(o))
	var oName string
	for _, p := range m.status6(t, ours).Peers.Details {
		if p.NetbirdIP == ipO {
			oName = p.FQDN
		}
	}
	if d, _, ok := m.waitDig(ours, "", oName, "AAAA", 10*time.Second, func(d digAnswer) bool { return d.is(o6.String()) }); !ok {
		t.Errorf("ours: AAAA %q = %+v, want %s", oName, d, o6)
	}
	if got, _ := m.status6(t, ours).peer6(ipO); got != o6.String() {
		t.Errorf("our status shows the official client's IPv6 as %q, want %s", got, o6)
	}
	if got, _ := m.status6(t, o).peer6(IPOf(m.Status(ours))); got != a6.String() {
		t.Errorf("the official status shows our IPv6 as %q, want %s", got, a6)
	}
}
