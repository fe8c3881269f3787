package forward

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

type fakeNAT struct {
	networks []netip.Prefix
	overlays []netip.Prefix
	tables   map[string]bool
	fail     error
}

func (n *fakeNAT) Set(ovs []netip.Prefix, nw []netip.Prefix) error {
	n.overlays = ovs
	if n.fail != nil {
		return n.fail
	}
	n.networks = nw
	n.tables["wiremesh-nat-wt9"] = len(nw) > 0
	return nil
}

func (n *fakeNAT) Close() error { n.tables["wiremesh-nat-wt9"] = false; return nil }

type host struct {
	t         *testing.T
	proc, dir string
	nat       *fakeNAT
}

func newHost(t *testing.T, v4, v6 string) *host {
	h := &host{t: t, proc: t.TempDir(), dir: t.TempDir(), nat: &fakeNAT{tables: map[string]bool{}}}
	for k, v := range map[string]string{sysctlV4: v4, sysctlV6: v6} {
		p := filepath.Join(h.proc, k)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

func (h *host) forwarder() *Forwarder {
	h.t.Helper()
	f, err := New(Options{StateDir: h.dir, Interface: "wt9", ProcRoot: h.proc, NAT: h.nat,
		RemoveTable: func(name string) error { h.nat.tables[name] = false; return nil }})
	if err != nil {
		h.t.Fatal(err)
	}
	return f
}

func (h *host) sysctl(k string) string {
	b, err := os.ReadFile(filepath.Join(h.proc, k))
	if err != nil {
		h.t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func (h *host) stateFile() bool {
	_, err := os.Stat(filepath.Join(h.dir, "forward-wt9.json"))
	return err == nil
}

var (
	overlay  = netip.MustParsePrefix("100.70.0.0/16")
	overlay6 = netip.MustParsePrefix("fd70::/64")
	ov4      = []netip.Prefix{overlay}
	lan      = netip.MustParsePrefix("192.168.50.0/24")
	lan6     = netip.MustParsePrefix("fd50::/64")
)

func TestApplyAndClose(t *testing.T) {
	h := newHost(t, "0", "0")
	f := h.forwarder()
	if err := f.Apply(ov4, nil); err != nil {
		t.Fatal(err)
	}
	if h.sysctl(sysctlV4) != "0" || h.stateFile() {
		t.Fatal("no routes changed something")
	}
	if err := f.Apply(ov4, []Route{{Network: lan, Masquerade: true}}); err != nil {
		t.Fatal(err)
	}
	if h.sysctl(sysctlV4) != "1" || h.sysctl(sysctlV6) != "0" {
		t.Errorf("v4 route: ip_forward=%s forwarding6=%s, want 1 and 0", h.sysctl(sysctlV4), h.sysctl(sysctlV6))
	}
	if !slices.Equal(h.nat.networks, []netip.Prefix{lan}) || !h.stateFile() {
		t.Errorf("masquerade %v, state file %v", h.nat.networks, h.stateFile())
	}
	// Masquerade off, an IPv6 route added.
	if err := f.Apply(ov4, []Route{{Network: lan}, {Network: lan6}}); err != nil {
		t.Fatal(err)
	}
	if h.sysctl(sysctlV6) != "1" || len(h.nat.networks) != 0 || h.nat.tables["wiremesh-nat-wt9"] {
		t.Errorf("after change: forwarding6=%s masquerade %v", h.sysctl(sysctlV6), h.nat.networks)
	}
	// Only IPv6 left: IPv4 forwarding goes back at once.
	if err := f.Apply(ov4, []Route{{Network: lan6}}); err != nil {
		t.Fatal(err)
	}
	if h.sysctl(sysctlV4) != "0" {
		t.Errorf("ip_forward=%s after the last IPv4 route went, want 0", h.sysctl(sysctlV4))
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if h.sysctl(sysctlV4) != "0" || h.sysctl(sysctlV6) != "0" || h.stateFile() {
		t.Errorf("after Close: %s %s state file %v", h.sysctl(sysctlV4), h.sysctl(sysctlV6), h.stateFile())
	}
	if err := f.Apply(ov4, []Route{{Network: lan}}); !errors.Is(err, ErrClosed) {
		t.Errorf("Apply after Close: %v, want ErrClosed", err)
	}
	if err := f.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// TestAlreadyOn: a host that forwarded before keeps forwarding after.
func TestAlreadyOn(t *testing.T) {
	h := newHost(t, "1", "0")
	f := h.forwarder()
	if err := f.Apply(ov4, []Route{{Network: lan}}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if h.sysctl(sysctlV4) != "1" {
		t.Error("Close turned off forwarding the host had on before")
	}
}

// TestCrashRecovery: a run killed while routing leaves its record; the
// next one restores the host before anything else.
func TestCrashRecovery(t *testing.T) {
	h := newHost(t, "0", "0")
	f := h.forwarder()
	if err := f.Apply(ov4, []Route{{Network: lan, Masquerade: true}, {Network: lan6}}); err != nil {
		t.Fatal(err)
	}
	// SIGKILL: no Close. The next run starts.
	_ = h.forwarder()
	if h.sysctl(sysctlV4) != "0" || h.sysctl(sysctlV6) != "0" || h.nat.tables["wiremesh-nat-wt9"] || h.stateFile() {
		t.Errorf("after recovery: ip_forward=%s forwarding6=%s nat=%v state file=%v",
			h.sysctl(sysctlV4), h.sysctl(sysctlV6), h.nat.tables, h.stateFile())
	}
}

// TestNATFailure: an error is reported; the sysctls are still recorded
// so Close restores them.
func TestNATFailure(t *testing.T) {
	h := newHost(t, "0", "0")
	f := h.forwarder()
	h.nat.fail = errors.New("no nf_tables")
	if err := f.Apply(ov4, []Route{{Network: lan, Masquerade: true}}); err == nil {
		t.Fatal("NAT failure not reported")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if h.sysctl(sysctlV4) != "0" || h.stateFile() {
		t.Error("Close after a failed Apply left changes")
	}
}

// TestMasqueradeOtherFamilyWarns: an IPv6 route asking for masquerade
// over an IPv4 overlay gets no NAT; that is logged once, not silently
// skipped, and no NAT rule is asked for it.
func TestMasqueradeOtherFamilyWarns(t *testing.T) {
	h := newHost(t, "0", "0")
	var logs strings.Builder
	f, err := New(Options{StateDir: h.dir, Interface: "wt9", ProcRoot: h.proc, NAT: h.nat, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		RemoveTable: func(name string) error { h.nat.tables[name] = false; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	routes := []Route{{Network: lan, Masquerade: true}, {Network: lan6, Masquerade: true}}
	for i := 0; i < 3; i++ {
		if err := f.Apply(ov4, routes); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "network="+lan6.String()); n != 1 {
		t.Errorf("warned %d times about %v's missing NAT, want once:\n%s", n, lan6, logs.String())
	}
	if !slices.Equal(h.nat.networks, []netip.Prefix{lan}) {
		t.Errorf("masquerade asked for %v, want only %v", h.nat.networks, lan)
	}
	// Gone and back: warned again.
	if err := f.Apply(ov4, routes[:1]); err != nil {
		t.Fatal(err)
	}
	if err := f.Apply(ov4, routes); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(logs.String(), "network="+lan6.String()); n != 2 {
		t.Errorf("warned %d times after the route came back, want 2", n)
	}
}

// TestDualStackMasquerade: with an IPv4 and an IPv6 overlay each route
// is masqueraded from the overlay of its own family, and no warning is
// logged for the IPv6 one.
func TestDualStackMasquerade(t *testing.T) {
	h := newHost(t, "0", "0")
	var logs strings.Builder
	f, err := New(Options{StateDir: h.dir, Interface: "wt9", ProcRoot: h.proc, NAT: h.nat, Log: slog.New(slog.NewTextHandler(&logs, nil)),
		RemoveTable: func(name string) error { h.nat.tables[name] = false; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	ovs := []netip.Prefix{overlay, overlay6}
	exit6 := netip.MustParsePrefix("::/0")
	if err := f.Apply(ovs, []Route{{Network: lan, Masquerade: true}, {Network: exit6, Masquerade: true}, {Network: lan6}}); err != nil {
		t.Fatal(err)
	}
	if want := []netip.Prefix{lan, exit6}; !slices.Equal(h.nat.networks, want) || !slices.Equal(h.nat.overlays, ovs) {
		t.Errorf("NAT asked for %v from %v, want %v from %v", h.nat.networks, h.nat.overlays, want, ovs)
	}
	if h.sysctl(sysctlV4) != "1" || h.sysctl(sysctlV6) != "1" {
		t.Errorf("ip_forward=%s forwarding6=%s, want 1 and 1", h.sysctl(sysctlV4), h.sysctl(sysctlV6))
	}
	if strings.Contains(logs.String(), "masquerade") {
		t.Errorf("warned about masquerade with an overlay of each family:\n%s", logs.String())
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if h.sysctl(sysctlV4) != "0" || h.sysctl(sysctlV6) != "0" || h.nat.tables["wiremesh-nat-wt9"] || h.stateFile() {
		t.Errorf("after Close: %s %s nat=%v state file %v", h.sysctl(sysctlV4), h.sysctl(sysctlV6), h.nat.tables, h.stateFile())
	}
}

// TestAcceptRA: IPv6 forwarding would make the host ignore router
// advertisements; accept_ra goes from 1 to 2 first on the default
// template and each interface but lo and the WireGuard one, an
// administrator's 0 or 2 is left alone, and all of it comes back when
// IPv6 routing stops, on Close and after a crash, also for an interface
// gone meanwhile.
func TestAcceptRA(t *testing.T) {
	h := newHost(t, "0", "0")
	start := map[string]string{"default": "1", "lo": "1", "eth0": "1", "eth1": "0", "eth2": "2", "wt9": "1", "eth0.100": "1"}
	for n, v := range start {
		p := filepath.Join(h.proc, acceptRAKey(n))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(v+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, want map[string]string) {
		t.Helper()
		for n, v := range want {
			if got := h.sysctl(acceptRAKey(n)); got != v {
				t.Errorf("%s: %s accept_ra=%s, want %s", what, n, got, v)
			}
		}
	}
	routing := map[string]string{"default": "2", "lo": "1", "eth0": "2", "eth1": "0", "eth2": "2", "wt9": "1", "eth0.100": "2"}
	f := h.forwarder()
	if err := f.Apply(ov4, []Route{{Network: lan}}); err != nil {
		t.Fatal(err)
	}
	check("IPv4 routes only", start)
	if err := f.Apply(ov4, []Route{{Network: lan}, {Network: lan6}}); err != nil {
		t.Fatal(err)
	}
	check("routing IPv6", routing)
	if h.sysctl(sysctlV6) != "1" {
		t.Errorf("forwarding6=%s while routing IPv6", h.sysctl(sysctlV6))
	}
	if err := f.Apply(ov4, []Route{{Network: lan}}); err != nil {
		t.Fatal(err)
	}
	check("IPv6 route gone", start)
	if h.sysctl(sysctlV6) != "0" || h.sysctl(sysctlV4) != "1" {
		t.Errorf("IPv6 route gone: forwarding6=%s ip_forward=%s, want 0 and 1", h.sysctl(sysctlV6), h.sysctl(sysctlV4))
	}
	// A crash while routing IPv6: the next run restores the host.
	if err := f.Apply(ov4, []Route{{Network: lan6}}); err != nil {
		t.Fatal(err)
	}
	check("routing IPv6 again", routing)
	f = h.forwarder()
	check("after a crash", start)
	// An interface removed while routing: Close still succeeds.
	if err := f.Apply(ov4, []Route{{Network: lan6}}); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(h.proc, confV6, "eth0")); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close with an interface gone: %v", err)
	}
	delete(start, "eth0")
	check("after Close", start)
	if h.sysctl(sysctlV6) != "0" || h.stateFile() {
		t.Errorf("after Close: forwarding6=%s state file %v", h.sysctl(sysctlV6), h.stateFile())
	}
}
