package hostdns

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/wiremesh/wiremesh/internal/netlab"
)

// fakeNM is NetworkManager as its D-Bus API documents it, for one device:
// GetDeviceByIpIface (s → o, UnknownDevice for another interface),
// Device.GetAppliedConnection (u → a{sa{sv}} t) and Device.Reapply
// (a{sa{sv}} t u: a non-zero version must be the current one, the given
// settings replace the applied ones, the version goes up). It refuses
// any call whose D-Bus signature is not NetworkManager's, so arguments
// of the wrong type fail the test rather than being converted.
type fakeNM struct {
	iface string
	dev   dbus.ObjectPath

	mu      sync.Mutex
	applied nmSettings
	version uint64
	calls   []string
	// reapplied are the versions and flags each Reapply was given.
	reapplied [][2]uint64
	errs      []string // protocol violations seen
}

func (f *fakeNM) check(msg dbus.Message, method, want string) *dbus.Error {
	got, _ := msg.Headers[dbus.FieldSignature].Value().(dbus.Signature)
	f.calls = append(f.calls, method)
	if got.String() != want {
		e := fmt.Sprintf("%s called with signature %q, NetworkManager's is %q", method, got.String(), want)
		f.errs = append(f.errs, e)
		return dbus.NewError("org.freedesktop.DBus.Error.InvalidArgs", []any{e})
	}
	return nil
}

type fakeNMManager struct{ f *fakeNM }

func (m fakeNMManager) GetDeviceByIpIface(msg dbus.Message, iface string) (dbus.ObjectPath, *dbus.Error) {
	f := m.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(msg, "GetDeviceByIpIface", "s"); err != nil {
		return "/", err
	}
	if iface != f.iface {
		return "/", dbus.NewError("org.freedesktop.NetworkManager.UnknownDevice", []any{"No device found for the requested iface."})
	}
	return f.dev, nil
}

type fakeNMDevice struct{ f *fakeNM }

func (d fakeNMDevice) GetAppliedConnection(msg dbus.Message, flags uint32) (map[string]map[string]dbus.Variant, uint64, *dbus.Error) {
	f := d.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(msg, "GetAppliedConnection", "u"); err != nil {
		return nil, 0, err
	}
	// As NetworkManager, the deprecated address and route lists come
	// along with their *-data successors.
	out := cloneNM(f.applied)
	for _, fam := range []string{"ipv4", "ipv6"} {
		if out[fam] != nil {
			out[fam]["addresses"] = dbus.MakeVariant([][]uint32{})
			out[fam]["routes"] = dbus.MakeVariant([][]uint32{})
		}
	}
	return out, f.version, nil
}

func (d fakeNMDevice) Reapply(msg dbus.Message, conn map[string]map[string]dbus.Variant, version uint64, flags uint32) *dbus.Error {
	f := d.f
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.check(msg, "Reapply", "a{sa{sv}}tu"); err != nil {
		return err
	}
	f.reapplied = append(f.reapplied, [2]uint64{version, uint64(flags)})
	if version != 0 && version != f.version {
		return dbus.NewError("org.freedesktop.NetworkManager.Device.VersionIdMismatch", []any{"The version id mismatches"})
	}
	for _, fam := range []string{"ipv4", "ipv6"} {
		// NetworkManager takes address-data over the deprecated list.
		delete(conn[fam], "addresses")
		delete(conn[fam], "routes")
	}
	f.applied = cloneNM(conn)
	f.version++
	return nil
}

func cloneNM(s nmSettings) nmSettings {
	out := nmSettings{}
	for k, v := range s {
		out[k] = map[string]dbus.Variant{}
		for kk, vv := range v {
			out[k][kk] = vv
		}
	}
	return out
}

// nmOriginal is a WireGuard device's applied connection before the agent.
func nmOriginal() nmSettings {
	return nmSettings{
		"connection": {"id": dbus.MakeVariant("wm-nm0"), "type": dbus.MakeVariant("wireguard"), "interface-name": dbus.MakeVariant("wm-nm0")},
		"ipv4": {"method": dbus.MakeVariant("manual"), "address-data": dbus.MakeVariant([]map[string]dbus.Variant{
			{"address": dbus.MakeVariant("100.64.0.1"), "prefix": dbus.MakeVariant(uint32(10))}})},
		"ipv6": {"method": dbus.MakeVariant("disabled")},
	}
}

// startNM runs a private dbus-daemon with the fake on it and returns the
// fake and a dialer for the bus.
func startNM(t *testing.T, iface string) (*fakeNM, BusDialer) {
	t.Helper()
	if _, err := exec.LookPath("dbus-daemon"); err != nil {
		t.Skip("dbus-daemon missing (bash scripts/deps.sh)")
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "bus")
	conf := filepath.Join(dir, "bus.conf")
	if err := os.WriteFile(conf, []byte(netlab.BusConf(sock)), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("dbus-daemon", "--config-file="+conf, "--nofork", "--nopidfile")
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	for i := 0; ; i++ {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if i == 100 {
			t.Fatal("dbus-daemon did not create its socket")
		}
		time.Sleep(20 * time.Millisecond)
	}
	addr := "unix:path=" + sock
	dial := func(ctx context.Context) (*dbus.Conn, error) { return dbus.Connect(addr, dbus.WithContext(ctx)) }

	f := &fakeNM{iface: iface, dev: "/org/freedesktop/NetworkManager/Devices/7", applied: nmOriginal(), version: 41}
	conn, err := dial(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if err := conn.Export(fakeNMManager{f}, nmPath, nmDest); err != nil {
		t.Fatal(err)
	}
	if err := conn.Export(fakeNMDevice{f}, f.dev, nmDevice); err != nil {
		t.Fatal(err)
	}
	if r, err := conn.RequestName(nmDest, dbus.NameFlagDoNotQueue); err != nil || r != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("own %s: %v %v", nmDest, r, err)
	}
	return f, dial
}

// dnsOf reads the DNS keys of one family back the way NetworkManager
// does: ipv4.dns as in_addr_t values (the address bytes in memory order),
// ipv6.dns as 16-byte arrays; it fails on any other D-Bus type.
func dnsOf(t *testing.T, s nmSettings, fam string) (servers []netip.Addr, search []string, prio int32, present []string) {
	t.Helper()
	sec := s[fam]
	for _, k := range []string{"dns", "dns-search", "dns-priority"} {
		if _, ok := sec[k]; ok {
			present = append(present, k)
		}
	}
	if v, ok := sec["dns"]; ok {
		switch fam {
		case "ipv4":
			if v.Signature().String() != "au" {
				t.Fatalf("ipv4.dns has D-Bus type %s, NetworkManager's is au", v.Signature())
			}
			for _, u := range v.Value().([]uint32) {
				var b [4]byte
				binary.NativeEndian.PutUint32(b[:], u)
				servers = append(servers, netip.AddrFrom4(b))
			}
		case "ipv6":
			if v.Signature().String() != "aay" {
				t.Fatalf("ipv6.dns has D-Bus type %s, NetworkManager's is aay", v.Signature())
			}
			for _, b := range v.Value().([][]byte) {
				a, ok := netip.AddrFromSlice(b)
				if !ok || !a.Is6() {
					t.Fatalf("ipv6.dns entry %x is not 16 bytes", b)
				}
				servers = append(servers, a)
			}
		}
	}
	if v, ok := sec["dns-search"]; ok {
		if v.Signature().String() != "as" {
			t.Fatalf("%s.dns-search has D-Bus type %s, NetworkManager's is as", fam, v.Signature())
		}
		search = v.Value().([]string)
	}
	if v, ok := sec["dns-priority"]; ok {
		if v.Signature().String() != "i" {
			t.Fatalf("%s.dns-priority has D-Bus type %s, NetworkManager's is i", fam, v.Signature())
		}
		prio = v.Value().(int32)
	}
	return servers, search, prio, present
}

// TestNetworkManagerFakeBus drives the real NetworkManager integration
// against a fake NetworkManager on a private D-Bus bus: Apply sets the
// overlay device's DNS keys with NetworkManager's types and reapplies
// with the version it read, changes follow (primary group, IPv6 server),
// Restore gives back exactly the original connection, a crashed run is
// undone by Recover, and a device NetworkManager no longer knows is not
// an error on restore.
func TestNetworkManagerFakeBus(t *testing.T) {
	const iface = "wm-nm0"
	f, dial := startNM(t, iface)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	state := t.TempDir()
	opts := Options{Interface: iface, StateDir: state, Bus: dial, Modes: []Mode{ModeNetworkManager}}
	h := New(ctx, opts)
	server := netip.MustParseAddrPort("100.64.0.1:53")

	lastVersion := func() uint64 {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.reapplied[len(f.reapplied)-1][0]
	}
	snapshot := func() (nmSettings, uint64) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return cloneNM(f.applied), f.version
	}
	expect := func(step, fam string, servers []netip.Addr, search []string, prio int32) {
		t.Helper()
		s, _ := snapshot()
		gs, gd, gp, _ := dnsOf(t, s, fam)
		if !slices.Equal(gs, servers) || !slices.Equal(gd, search) || gp != prio {
			t.Errorf("%s: %s dns %v search %q priority %d, want %v %q %d", step, fam, gs, gd, gp, servers, search, prio)
		}
		other := map[string]string{"ipv4": "ipv6", "ipv6": "ipv4"}[fam]
		if _, _, _, present := dnsOf(t, s, other); len(present) > 0 {
			t.Errorf("%s: %s keeps DNS keys %v", step, other, present)
		}
		// Everything else of the connection is kept.
		want := nmOriginal()
		for _, fam := range []string{"ipv4", "ipv6"} {
			nmClear(s, fam)
		}
		if !reflect.DeepEqual(s, want) {
			t.Errorf("%s: the rest of the connection changed:\n got %v\nwant %v", step, s, want)
		}
	}

	// Split DNS: a search domain and a match domain.
	_, v0 := snapshot()
	cfg := Config{Server: server, Domains: []Domain{{Name: "netbird.selfhosted."}, {Name: "corp.example", MatchOnly: true}}}
	if err := h.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	expect("split", "ipv4", []netip.Addr{server.Addr()}, []string{"netbird.selfhosted", "~corp.example"}, nmPriorityMatch)
	if got := lastVersion(); got != v0 {
		t.Errorf("Reapply given version %d, GetAppliedConnection said %d", got, v0)
	}
	if _, err := os.Stat(filepath.Join(state, stateFile)); err != nil {
		t.Errorf("no state record while applied: %v", err)
	}

	// A primary group: every query, ahead of the other connections.
	_, v1 := snapshot()
	cfg.RouteAll = true
	if err := h.Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	expect("primary", "ipv4", []netip.Addr{server.Addr()}, []string{"netbird.selfhosted", "~corp.example", "~."}, nmPriorityPrimary)
	if got := lastVersion(); got != v1 || v1 == v0 {
		t.Errorf("second Reapply given version %d, the device's was %d (first %d)", got, v1, v0)
	}

	// Search domains only, on an IPv6 server: the IPv4 keys go.
	v6 := netip.MustParseAddrPort("[fd00:1234::1]:53")
	if err := h.Apply(ctx, Config{Server: v6, Domains: []Domain{{Name: "netbird.selfhosted"}}}); err != nil {
		t.Fatal(err)
	}
	expect("ipv6", "ipv6", []netip.Addr{v6.Addr()}, []string{"netbird.selfhosted"}, nmPrioritySearchOnly)

	if err := h.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if s, _ := snapshot(); !reflect.DeepEqual(s, nmOriginal()) {
		t.Errorf("after Restore the connection is\n%v\nwant the original\n%v", s, nmOriginal())
	}
	if _, err := os.Stat(filepath.Join(state, stateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state record left after Restore: %v", err)
	}

	// A port NetworkManager cannot express is refused before any call.
	f.mu.Lock()
	n := len(f.calls)
	f.mu.Unlock()
	if err := (&networkManager{iface: iface, bus: dial}).apply(ctx, Config{Server: netip.MustParseAddrPort("100.64.0.1:5053")}); !errors.Is(err, ErrUnavailable) {
		t.Errorf("apply on port 5053: %v, want ErrUnavailable", err)
	}
	f.mu.Lock()
	if len(f.calls) != n {
		t.Errorf("apply on port 5053 called NetworkManager: %v", f.calls[n:])
	}
	f.mu.Unlock()

	// A crash: applied, never restored; the next start's Recover undoes it.
	if err := New(ctx, opts).Apply(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if s, _ := snapshot(); reflect.DeepEqual(s, nmOriginal()) {
		t.Fatal("the crashed run's Apply changed nothing")
	}
	m, err := Recover(ctx, Options{StateDir: state, Bus: dial})
	if err != nil || m != ModeNetworkManager {
		t.Fatalf("Recover: %s, %v", m, err)
	}
	if s, _ := snapshot(); !reflect.DeepEqual(s, nmOriginal()) {
		t.Errorf("after Recover the connection is\n%v\nwant the original", s)
	}
	if _, err := os.Stat(filepath.Join(state, stateFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state record left after Recover: %v", err)
	}

	// A device NetworkManager no longer knows (the interface went): Apply
	// fails with NetworkManager's error, restore has nothing to undo.
	gone := &networkManager{iface: "wm-gone0", bus: dial}
	if err := gone.apply(ctx, cfg); err == nil {
		t.Error("apply on an unknown device succeeded")
	}
	if err := gone.restore(ctx); err != nil {
		t.Errorf("restore on a device that went: %v", err)
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.errs) > 0 {
		t.Errorf("calls NetworkManager would refuse: %v", f.errs)
	}
	for _, r := range f.reapplied {
		if r[1] != 0 {
			t.Errorf("Reapply flags %d, want 0", r[1])
		}
	}
}
