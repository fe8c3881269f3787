package resolvconf

import (
	"errors"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const orig = "# from DHCP\nsearch corp.example\nnameserver 192.0.2.53\nnameserver fe80::1%eth0\noptions edns0 timeout:2\n"

func files(t *testing.T) File {
	dir := t.TempDir()
	f := File{Path: filepath.Join(dir, "resolv.conf"), Backup: filepath.Join(dir, "state", "resolv.conf.original")}
	if err := os.Mkdir(filepath.Dir(f.Backup), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(f.Path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestApplyRestore(t *testing.T) {
	f := files(t)
	ns := netip.MustParseAddr("100.64.0.1")
	c, err := f.Apply(ns, []string{"netbird.selfhosted"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.Nameservers, []netip.Addr{netip.MustParseAddr("192.0.2.53"), netip.MustParseAddr("fe80::1")}) {
		t.Fatalf("original name servers: %v", c.Nameservers)
	}
	got, _ := os.ReadFile(f.Path)
	for _, want := range []string{"search netbird.selfhosted corp.example\n", "nameserver 100.64.0.1\n", "options edns0 timeout:2\n"} {
		if !strings.Contains(string(got), want) {
			t.Fatalf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "192.0.2.53") {
		t.Fatalf("the original name server must go (the agent forwards to it):\n%s", got)
	}
	// Applying again (a crash, a new address) keeps the first original.
	if _, err := f.Apply(netip.MustParseAddr("100.64.0.2"), []string{"netbird.selfhosted"}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.Backup); string(b) != orig {
		t.Fatalf("backup overwritten with the agent's version:\n%s", b)
	}
	if restored, err := f.Restore(); err != nil || !restored {
		t.Fatalf("restore: %v %v", restored, err)
	}
	if b, _ := os.ReadFile(f.Path); string(b) != orig {
		t.Fatalf("restored:\n%s", b)
	}
	if _, err := os.Stat(f.Backup); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the backup must go with the restore")
	}
	if restored, err := f.Restore(); err != nil || restored {
		t.Fatalf("a second restore: %v %v, want nothing done", restored, err)
	}
}

// TestInPlace: the file keeps its inode (a bind-mounted resolv.conf
// cannot be renamed over).
func TestInPlace(t *testing.T) {
	f := files(t)
	before, _ := os.Stat(f.Path)
	if _, err := f.Apply(netip.MustParseAddr("100.64.0.1"), nil); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(f.Path)
	if !os.SameFile(before, after) {
		t.Fatal("resolv.conf was replaced, not rewritten")
	}
}

func TestSymlinkLeftAlone(t *testing.T) {
	f := files(t)
	target := f.Path + ".stub"
	if err := os.Rename(f.Path, target); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, f.Path); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Apply(netip.MustParseAddr("100.64.0.1"), nil); !errors.Is(err, ErrNotAFile) {
		t.Fatalf("apply through a link: %v", err)
	}
	if b, _ := os.ReadFile(target); string(b) != orig {
		t.Fatalf("the link's target changed:\n%s", b)
	}
	if _, err := os.Stat(f.Backup); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("no backup may be left when nothing was changed")
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(orig))
	f.Add([]byte("nameserver\nsearch\noptions\n;x\nnameserver 1.2.3.4 5.6.7.8\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		c := Parse(b)
		for _, a := range c.Nameservers {
			if !a.IsValid() || a.Zone() != "" {
				t.Fatalf("bad name server %v", a)
			}
		}
	})
}

// TestOtherAgent: a second agent (another state directory) does not take
// the first one's file for the host's original.
func TestOtherAgent(t *testing.T) {
	f := files(t)
	if _, err := f.Apply(netip.MustParseAddr("100.64.0.1"), nil); err != nil {
		t.Fatal(err)
	}
	g := File{Path: f.Path, Backup: filepath.Join(t.TempDir(), "other.original")}
	if _, err := g.Apply(netip.MustParseAddr("100.65.0.1"), nil); !errors.Is(err, ErrOtherAgent) {
		t.Fatalf("second agent: %v", err)
	}
	if _, err := os.Stat(g.Backup); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the second agent saved the first one's file as its original")
	}
	if _, err := f.Restore(); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f.Path); string(b) != orig {
		t.Fatalf("restored:\n%s", b)
	}
}

// TestApplyRefusesUnsafeSearch (review finding 2, second guard): a search
// domain with a newline or space is refused before anything is written.
func TestApplyRefusesUnsafeSearch(t *testing.T) {
	dir := t.TempDir()
	f := File{Path: filepath.Join(dir, "resolv.conf"), Backup: filepath.Join(dir, "resolv.conf.bak")}
	const orig = "nameserver 192.0.2.1\n"
	if err := os.WriteFile(f.Path, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"a.example\nnameserver 6.6.6.6", "a.example options", "a\tb", "a\x00b"} {
		if _, err := f.Apply(netip.MustParseAddr("100.64.0.1"), []string{"ok.example", d}); !errors.Is(err, ErrBadDomain) {
			t.Errorf("%q: err = %v, want ErrBadDomain", d, err)
		}
		if b, _ := os.ReadFile(f.Path); string(b) != orig {
			t.Fatalf("%q: file changed:\n%s", d, b)
		}
		if _, err := os.Stat(f.Backup); !os.IsNotExist(err) {
			t.Fatalf("%q: backup written", d)
		}
	}
}
