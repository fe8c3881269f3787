package secretbox

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	b, err := New(make([]byte, 32))
	if err != nil {
		t.Fatal(err)
	}
	v, err := b.Seal("s3cret", "row-1")
	if err != nil || !Sealed(v) || strings.Contains(v, "s3cret") {
		t.Fatalf("sealed %q %v", v, err)
	}
	if v2, _ := b.Seal("s3cret", "row-1"); v2 == v {
		t.Error("two seals of one secret are equal (nonce reused)")
	}
	if p, err := b.Open(v, "row-1"); err != nil || p != "s3cret" {
		t.Fatalf("open: %q %v", p, err)
	}
	if _, err := b.Open(v, "row-2"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("opened under another row: %v", err)
	}
	other, _ := New(append(make([]byte, 31), 1))
	if _, err := other.Open(v, "row-1"); !errors.Is(err, ErrCorrupt) {
		t.Errorf("opened with another key: %v", err)
	}
	for _, bad := range []string{"s3cret", Prefix, Prefix + "!!", v[:len(v)-2]} {
		if _, err := b.Open(bad, "row-1"); !errors.Is(err, ErrCorrupt) {
			t.Errorf("Open(%q): %v", bad, err)
		}
	}
}

func TestParseKey(t *testing.T) {
	k := []byte("0123456789abcdef0123456789abcdef")
	for _, s := range []string{base64.StdEncoding.EncodeToString(k), base64.RawURLEncoding.EncodeToString(k), hex.EncodeToString(k), " " + hex.EncodeToString(k) + "\n"} {
		if got, err := ParseKey(s); err != nil || string(got) != string(k) {
			t.Errorf("ParseKey(%q) = %q, %v", s, got, err)
		}
	}
	for _, s := range []string{"", "short", base64.StdEncoding.EncodeToString(k[:16])} {
		if _, err := ParseKey(s); err == nil {
			t.Errorf("ParseKey(%q) accepted", s)
		}
	}
}

func TestLoadKeyFile(t *testing.T) {
	dir := t.TempDir()
	k1, err := LoadKeyFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(filepath.Join(dir, KeyFile))
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v %v, want mode 0600", st, err)
	}
	k2, err := LoadKeyFile(dir)
	if err != nil || string(k1) != string(k2) || len(k1) != 32 {
		t.Fatalf("second load: %x %v, first %x", k2, err, k1)
	}
	if err := os.WriteFile(filepath.Join(dir, KeyFile), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadKeyFile(dir); err == nil {
		t.Error("a garbled key file was accepted")
	}
}
