package hostdns

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/client/resolvconf"
)

// TestHostsFileInjection (review finding 1): a name from the map holding
// a newline and the block's end line must never reach the file; after
// Apply and Restore the file is byte-identical.
func TestHostsFileInjection(t *testing.T) {
	p := filepath.Join(t.TempDir(), "hosts")
	const orig = "127.0.0.1 localhost\n"
	if err := os.WriteFile(p, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	c := testCfg
	c.Hosts = append([]HostEntry{{Name: "peer.netbird.cloud.\n" + hostsEnd + "\n6.6.6.6 bank.example", Addr: netip.MustParseAddr("100.64.0.9")},
		{Name: "*.netbird.cloud", Addr: netip.MustParseAddr("100.64.0.8")},
		{Name: "a b.netbird.cloud", Addr: netip.MustParseAddr("100.64.0.7")}}, c.Hosts...)
	ctx := context.Background()
	h := New(ctx, Options{HostsPath: p, Modes: []Mode{ModeHosts}})
	if err := h.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	for _, bad := range []string{"bank.example", "100.64.0.9", "100.64.0.8", "100.64.0.7"} {
		if strings.Contains(string(b), bad) {
			t.Fatalf("%q written:\n%s", bad, b)
		}
	}
	if !strings.Contains(string(b), "100.64.0.2 laptop.netbird.cloud") {
		t.Fatalf("good entry missing:\n%s", b)
	}
	// The block renderer refuses them on its own too.
	if blk := hostsBlock(Config{Hosts: c.Hosts[:3]}); strings.Count(blk, "\n") != 2 {
		t.Fatalf("hostsBlock wrote unsafe names:\n%s", blk)
	}
	if err := h.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); string(b) != orig {
		t.Fatalf("restored %q, want %q", b, orig)
	}
}

// TestFallbackRetriesBetterMode (review finding 10): once on the hosts
// file because resolv.conf could not be used, an Apply after retryBetter
// tries resolv.conf again and, now that it works, moves there and takes
// the block out of the hosts file.
func TestFallbackRetriesBetterMode(t *testing.T) {
	dir := t.TempDir()
	target := filepath.Join(dir, "managed-resolv.conf")
	os.WriteFile(target, []byte("nameserver 192.0.2.1\n"), 0o644)
	rc := filepath.Join(dir, "resolv.conf")
	if err := os.Symlink(target, rc); err != nil {
		t.Fatal(err)
	}
	hosts := filepath.Join(dir, "hosts")
	const orig = "127.0.0.1 localhost\n"
	os.WriteFile(hosts, []byte(orig), 0o644)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ctx := context.Background()
	h := New(ctx, Options{StateDir: dir, HostsPath: hosts, Modes: []Mode{ModeResolvConf, ModeHosts}, Now: func() time.Time { return now },
		ResolvConf: resolvconf.File{Path: rc, Backup: filepath.Join(dir, "resolv.conf.original")}})
	if err := h.Apply(ctx, testCfg); err != nil || h.Mode() != ModeHosts {
		t.Fatalf("Apply: %v, mode %q", err, h.Mode())
	}
	// resolv.conf becomes a plain file (the other manager is gone).
	os.Remove(rc)
	os.WriteFile(rc, []byte("nameserver 192.0.2.1\n"), 0o644)
	now = now.Add(retryBetter / 2)
	if err := h.Apply(ctx, testCfg); err != nil || h.Mode() != ModeHosts {
		t.Fatalf("too early: %v, mode %q", err, h.Mode())
	}
	now = now.Add(retryBetter)
	if err := h.Apply(ctx, testCfg); err != nil || h.Mode() != ModeResolvConf {
		t.Fatalf("retry: %v, mode %q", err, h.Mode())
	}
	if b, _ := os.ReadFile(hosts); string(b) != orig {
		t.Fatalf("hosts block left after moving to resolv.conf:\n%s", b)
	}
	if err := h.Restore(ctx); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(rc); string(b) != "nameserver 192.0.2.1\n" {
		t.Fatalf("resolv.conf after restore:\n%s", b)
	}
}
