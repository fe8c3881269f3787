package e2e

import (
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/nftables"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// listen opens a TCP listener on ip:port inside an agent's namespace that
// echoes what it receives.
func listen(t *testing.T, a *Agent, ip string, port int) { t.Helper(); listenNS(t, a.NS, ip, port) }

// listenNS is listen in any namespace of the lab.
func listenNS(t *testing.T, ns, ip string, port int) {
	t.Helper()
	var ln net.Listener
	if err := netlab.Do(ns, func() error {
		var err error
		ln, err = net.Listen("tcp4", fmt.Sprintf("%s:%d", ip, port))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1024)
				for {
					n, err := c.Read(buf)
					if err != nil {
						return
					}
					if _, err := c.Write(buf[:n]); err != nil {
						return
					}
				}
			}()
		}
	}()
}

// dial connects from an agent's namespace (short timeout: a dropped SYN
// must fail fast).
func dial(a *Agent, ip string, port int) (net.Conn, error) {
	var c net.Conn
	err := netlab.Do(a.NS, func() error {
		var err error
		c, err = net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", ip, port), 1500*time.Millisecond)
		return err
	})
	return c, err
}

func echoes(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := c.Write([]byte("ping")); err != nil {
		return false
	}
	buf := make([]byte, 4)
	n, err := c.Read(buf)
	return err == nil && string(buf[:n]) == "ping"
}

// TestPolicyEnforced: with the Default policy off and a tcp/22-only policy
// from group A to group B, A reaches B on 22 but not 80, B cannot open a
// connection to A, ICMP is dropped both ways, and a peer outside every
// policy disappears from the others' maps; the change reaches running
// agents quickly and does not restart the tunnel (an open connection
// survives it).
func TestPolicyEnforced(t *testing.T) { policyEnforced(t, NewMesh(t)) }

// TestPolicyEnforcedNftables: the same with the rules in the kernel's
// nftables on the interface (NB_FIREWALL=nftables) instead of the
// userspace filter, and kernel WireGuard asked for (NB_WG_KERNEL=true):
// where the kernel has it, this runs the whole mesh on kernel interfaces;
// here (none) the agents detect that and run wireguard-go.
func TestPolicyEnforcedNftables(t *testing.T) {
	m := NewMesh(t)
	m.AgentEnv = []string{"NB_FIREWALL=nftables", "NB_WG_KERNEL=true"}
	policyEnforced(t, m)
}

func policyEnforced(t *testing.T, m *Mesh) {
	a, b, c := m.Agent("a", netlab.Home), m.Agent("b", netlab.Home), m.Agent("c", netlab.Home)
	for _, x := range []*Agent{a, b, c} {
		m.Up(x)
	}
	if len(m.AgentEnv) > 0 {
		var st struct {
			Kernel bool `json:"usesKernelInterface"`
		}
		out, _ := m.CLI(b, "status", "--json")
		_ = json.Unmarshal([]byte(out), &st)
		t.Logf("kernel WireGuard: %v", st.Kernel)
		if !st.Kernel && !strings.Contains(b.Daemon.Output(), "kernel WireGuard unavailable") {
			t.Fatal("NB_WG_KERNEL=true: neither a kernel interface nor the fallback's log line")
		}
		if !hasTable(t, b.NS, "wiremesh-"+b.Iface) {
			t.Fatal("NB_FIREWALL=nftables: no nftables table for the interface")
		}
		defer func() {
			if out, err := m.CLI(b, "down"); err != nil {
				t.Errorf("down: %v\n%s", err, out)
			} else if hasTable(t, b.NS, "wiremesh-"+b.Iface) {
				t.Error("down left the nftables table behind")
			}
		}()
	}
	ipA, ipB, ipC := IPOf(m.Status(a)), IPOf(m.Status(b)), IPOf(m.Status(c))
	if _, ok := m.WaitPing(a, ipB, 15*time.Second); !ok {
		t.Fatal("a cannot reach b under the default policy")
	}
	listen(t, b, ipB, 22)
	listen(t, b, ipB, 80)
	listen(t, a, ipA, 22)
	open, err := dial(a, ipB, 22)
	if err != nil || !echoes(open) {
		t.Fatalf("a -> b:22 under the default policy: %v", err)
	}
	defer open.Close()

	out, err := m.Admin("peers", "list", "--json")
	if err != nil {
		t.Fatal(err)
	}
	var ps []struct{ ID, Name string }
	_ = json.Unmarshal([]byte(out), &ps)
	ids := map[string]string{}
	for _, p := range ps {
		ids[p.Name] = p.ID
	}
	admin := func(args ...string) string {
		t.Helper()
		out, err := m.Admin(args...)
		if err != nil {
			t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	admin("groups", "create", "A", ids["a"])
	admin("groups", "create", "B", ids["b"])
	admin("policies", "create", "--name", "ssh", "--source", "A", "--destination", "B", "--protocol", "tcp", "--ports", "22")
	var pols []struct {
		ID, Name string
	}
	_ = json.Unmarshal([]byte(admin("policies", "list", "--json")), &pols)
	var def string
	for _, p := range pols {
		if p.Name == "Default" {
			def = p.ID
		}
	}
	if def == "" {
		t.Fatalf("no Default policy: %+v", pols)
	}
	admin("policies", "disable", def)
	changed := time.Now()

	// b stops accepting a's connections to port 80 once the new rules are
	// in (a dropped SYN times out; an accepted one is answered at once).
	var enforced time.Duration
	for {
		at := time.Since(changed)
		var cn net.Conn
		err := netlab.Do(a.NS, func() error {
			var err error
			cn, err = net.DialTimeout("tcp4", ipB+":80", 300*time.Millisecond)
			return err
		})
		if err != nil {
			enforced = at
			break
		}
		cn.Close()
		if at > 10*time.Second {
			t.Fatal("the policy change did not reach the agents within 10 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("policy change enforced %v after the admin command (which a running server notices by polling the store)", enforced.Round(time.Millisecond))
	if m.Ping(a, ipB) {
		t.Error("ICMP a -> b passes")
	}
	if m.Ping(b, ipA) {
		t.Error("ICMP b -> a passes")
	}
	if cn, err := dial(a, ipB, 22); err != nil || !echoes(cn) {
		t.Errorf("a -> b:22 refused: %v", err)
	} else {
		cn.Close()
	}
	if cn, err := dial(a, ipB, 80); err == nil {
		cn.Close()
		t.Error("a -> b:80 connected")
	}
	if cn, err := dial(b, ipA, 22); err == nil {
		cn.Close()
		t.Error("b -> a:22 connected (the rule is one-way)")
	}
	if !echoes(open) {
		t.Error("the connection opened before the change broke (tunnel restarted?)")
	}
	// c is in no policy now: nobody lists it, it lists nobody.
	deadline := time.Now().Add(10 * time.Second)
	for {
		st := m.Status(a)
		seesC := false
		for _, p := range st.Peers.Details {
			seesC = seesC || p.NetbirdIP == ipC
		}
		if !seesC && m.Status(c).Peers.Total == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("c still in maps: a sees %d peers, c sees %d", st.Peers.Total, m.Status(c).Peers.Total)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if m.Ping(c, ipA) {
		t.Error("c reaches a")
	}

	// Back to All-to-All.
	admin("policies", "enable", def)
	if _, ok := m.WaitPing(c, ipA, 15*time.Second); !ok {
		t.Fatal("c cannot reach a after the Default policy is back")
	}
	if cn, err := dial(b, ipA, 22); err != nil {
		t.Errorf("b -> a:22 after the Default policy is back: %v", err)
	} else {
		cn.Close()
	}
}

// hasTable reports whether namespace ns holds an nftables table.
func hasTable(t *testing.T, ns, name string) bool {
	t.Helper()
	found := false
	if err := netlab.Do(ns, func() error {
		c, err := nftables.New()
		if err != nil {
			return err
		}
		ts, err := c.ListTables()
		for _, tb := range ts {
			found = found || tb.Name == name
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return found
}
