package hostdns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// resolvedRoot is where scripts/deps.sh extracts systemd-resolved (never
// installed on the host, whose resolv.conf it would take over).
const resolvedRoot = "../../.cache/resolved/root"

// busConf is the private system bus's configuration (shared with the
// end-to-end tests' resolved, internal/netlab).
var busConf = netlab.BusConf("/run/dbus/system_bus_socket")

// TestResolvedReal runs the real systemd-resolved with a private system
// bus inside a network and mount namespace this test creates (a tmpfs on
// /run, so the host's bus and resolver are never touched), and checks
// that Apply sets the overlay link's server, routing domains and default
// route, that a change follows, and that Restore (and Recover after a
// "crash") reverts the link.
func TestResolvedReal(t *testing.T) {
	if os.Getenv("HOSTDNS_IN_NS") == "1" {
		resolvedInNamespace(t)
		return
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root for namespaces")
	}
	bin, err := filepath.Abs(filepath.Join(resolvedRoot, "lib/systemd/systemd-resolved"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		t.Skip("systemd-resolved not extracted (bash scripts/deps.sh): ", err)
	}
	for _, tool := range []string{"dbus-daemon", "unshare", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool, " missing")
		}
	}
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	passwd, _ := os.ReadFile("/etc/passwd")
	group, _ := os.ReadFile("/etc/group")
	// resolved drops privileges to its own user, which the host lacks:
	// the namespace sees a passwd that has it.
	pw := write("passwd", string(passwd)+"systemd-resolve:x:64990:64990::/:/usr/sbin/nologin\n")
	gr := write("group", string(group)+"systemd-resolve:x:64990:\n")
	bc := write("bus.conf", busConf)
	script := fmt.Sprintf(`set -e
mount --make-rprivate /
mount -t tmpfs tmpfs /run
mkdir -p /run/dbus /run/systemd
mount --bind %[1]s /etc/passwd
mount --bind %[2]s /etc/group
ip link set lo up
dbus-daemon --config-file=%[3]s --nofork --nopidfile & DPID=$!
trap 'kill $RPID $DPID 2>/dev/null; wait' EXIT
for i in $(seq 50); do [ -S /run/dbus/system_bus_socket ] && break; sleep 0.1; done
%[4]s & RPID=$!
HOSTDNS_IN_NS=1 %[5]s -test.run '^TestResolvedReal$' -test.v -test.count=1
`, pw, gr, bc, bin, os.Args[0])
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "unshare", "-m", "-n", "--fork", "sh", "-c", script).CombinedOutput()
	t.Logf("in the namespace:\n%s", out)
	if err != nil || !strings.Contains(string(out), "--- PASS: TestResolvedReal") {
		t.Fatalf("namespace run: %v", err)
	}
}

func resolvedInNamespace(t *testing.T) {
	ctx := context.Background()
	// Wait for resolved to own its name.
	deadline := time.Now().Add(10 * time.Second)
	for !onBus(ctx, SystemBus, resolvedDest) {
		if time.Now().After(deadline) {
			t.Fatal("systemd-resolved did not come up on the private bus")
		}
		time.Sleep(100 * time.Millisecond)
	}
	const ifname = "wt-hostdns"
	if out, err := exec.Command("ip", "tuntap", "add", ifname, "mode", "tun").CombinedOutput(); err != nil {
		t.Fatalf("tun: %v %s", err, out)
	}
	if out, err := exec.Command("ip", "link", "set", ifname, "up").CombinedOutput(); err != nil {
		t.Fatalf("up: %v %s", err, out)
	}
	ifc, err := net.InterfaceByName(ifname)
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	// Detection: resolved is on the bus, but this namespace's resolv.conf
	// (the host's) does not name its stub, so without nss-resolve it is
	// not the host's resolver; the explicit mode is what the test checks.
	h := New(ctx, Options{Interface: ifname, StateDir: state, Modes: []Mode{ModeResolved}})
	server := netip.MustParseAddrPort("100.64.0.1:53")
	cfg := Config{Server: server, Domains: []Domain{{Name: "netbird.cloud", MatchOnly: false}, {Name: "corp.example.", MatchOnly: true}}}
	if err := h.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if h.Mode() != ModeResolved {
		t.Fatalf("mode %q", h.Mode())
	}
	if _, err := os.Stat(filepath.Join(state, stateFile)); err != nil {
		t.Fatalf("no crash record while applied: %v", err)
	}
	dnsGot, doms, def := linkState(t, int32(ifc.Index))
	if want := []string{"100.64.0.1"}; !slices.Equal(dnsGot, want) {
		t.Errorf("link DNS = %v, want %v", dnsGot, want)
	}
	if want := []string{"netbird.cloud", "~corp.example"}; !slices.Equal(doms, want) {
		t.Errorf("link domains = %v, want %v", doms, want)
	}
	if def {
		t.Error("DefaultRoute set without a primary group")
	}
	// A primary group appears: "~." and DefaultRoute.
	cfg.RouteAll = true
	if err := h.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	_, doms, def = linkState(t, int32(ifc.Index))
	if want := []string{"netbird.cloud", "~corp.example", "~."}; !slices.Equal(doms, want) || !def {
		t.Errorf("with a primary group: domains %v default route %v, want %v true", doms, def, want)
	}
	if err := h.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	dnsGot, doms, _ = linkState(t, int32(ifc.Index))
	if len(dnsGot) != 0 || len(doms) != 0 {
		t.Errorf("after Restore: DNS %v domains %v, want none", dnsGot, doms)
	}
	if _, err := os.Stat(filepath.Join(state, stateFile)); !os.IsNotExist(err) {
		t.Errorf("crash record left after Restore: %v", err)
	}
	// A crash: applied, never restored; the next start's Recover reverts.
	crashed := New(ctx, Options{Interface: ifname, StateDir: state, Modes: []Mode{ModeResolved}})
	if err := crashed.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	m, err := Recover(ctx, Options{StateDir: state})
	if err != nil || m != ModeResolved {
		t.Fatalf("Recover = %q, %v", m, err)
	}
	dnsGot, doms, _ = linkState(t, int32(ifc.Index))
	if len(dnsGot) != 0 || len(doms) != 0 {
		t.Errorf("after Recover: DNS %v domains %v, want none", dnsGot, doms)
	}
}

// linkState reads the link's DNS servers, domains ("~" for routing-only)
// and DefaultRoute from resolved.
func linkState(t *testing.T, idx int32) (servers, domains []string, defaultRoute bool) {
	t.Helper()
	conn, err := SystemBus(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var path dbus.ObjectPath
	if err := conn.Object(resolvedDest, resolvedPath).Call(resolvedManager+".GetLink", 0, idx).Store(&path); err != nil {
		t.Fatal(err)
	}
	link := conn.Object(resolvedDest, path)
	v, err := link.GetProperty("org.freedesktop.resolve1.Link.DNS")
	if err != nil {
		t.Fatal(err)
	}
	var ds []struct {
		Family  int32
		Address []byte
	}
	if err := v.Store(&ds); err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		a, _ := netip.AddrFromSlice(d.Address)
		servers = append(servers, a.String())
	}
	v, err = link.GetProperty("org.freedesktop.resolve1.Link.Domains")
	if err != nil {
		t.Fatal(err)
	}
	var doms []struct {
		Name    string
		Routing bool
	}
	if err := v.Store(&doms); err != nil {
		t.Fatal(err)
	}
	for _, d := range doms {
		if d.Routing {
			d.Name = "~" + d.Name
		}
		domains = append(domains, d.Name)
	}
	v, err = link.GetProperty("org.freedesktop.resolve1.Link.DefaultRoute")
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Store(&defaultRoute); err != nil {
		t.Fatal(err)
	}
	return servers, domains, defaultRoute
}
