package state

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadCreatesAndKeepsIdentity(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sub", "config.json")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(p)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("config mode %v, %v", fi.Mode(), err)
	}
	c.ManagementURL = "http://x:1"
	if err := Save(p, c); err != nil {
		t.Fatal(err)
	}
	again, err := Load(p)
	if err != nil || again.PrivateKey != c.PrivateKey || again.ManagementURL != "http://x:1" {
		t.Fatalf("reload: %+v %v", again, err)
	}
	if err := os.WriteFile(p, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil {
		t.Fatal("corrupt config accepted")
	}
}

func TestProfiles(t *testing.T) {
	p := Profiles{Dir: t.TempDir()}
	if p.Active() != DefaultProfile {
		t.Fatalf("active %q", p.Active())
	}
	if err := p.Add("work"); err != nil {
		t.Fatal(err)
	}
	if err := p.Add("work"); err == nil {
		t.Fatal("added twice")
	}
	for _, bad := range []string{"", "../x", "a/b", ".hidden", strings.Repeat("x", 65)} {
		if err := p.Add(bad); err == nil {
			t.Errorf("bad name %q accepted", bad)
		}
	}
	def, _ := Load(p.Path(DefaultProfile))
	work, _ := Load(p.Path("work"))
	if def.PrivateKey == work.PrivateKey {
		t.Fatal("profiles share a key")
	}
	if err := p.SetActive("nope"); err == nil {
		t.Fatal("selected a missing profile")
	}
	if err := p.SetActive("work"); err != nil || p.Active() != "work" {
		t.Fatalf("select: %v %q", err, p.Active())
	}
	if err := p.Remove("work"); err == nil {
		t.Fatal("removed the active profile")
	}
	if err := p.Remove(DefaultProfile); err == nil {
		t.Fatal("removed the default profile")
	}
	if got := p.List(); len(got) != 2 || got[0] != DefaultProfile || got[1] != "work" {
		t.Fatalf("list %v", got)
	}
	_ = p.SetActive(DefaultProfile)
	if err := p.Remove("work"); err != nil || p.Exists("work") {
		t.Fatalf("remove: %v", err)
	}
}

// TestSSHKey: a rotated SSH key is kept in the 0600 profile and read back
// after a restart; a profile without one (every profile before the first
// rotation) has none, so the derived key stays; a damaged one is refused
// naming the field.
func TestSSHKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "config.json")
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.RotatedSSHKey() != nil || c.SSHKey != "" {
		t.Fatalf("a new profile has a rotated SSH key: %q", c.SSHKey)
	}
	if b, _ := os.ReadFile(p); strings.Contains(string(b), "ssh_key") {
		t.Fatalf("a profile that never rotated writes ssh_key: %s", b)
	}
	pemKey, k, err := NewSSHKey()
	if err != nil {
		t.Fatal(err)
	}
	_, k2, _ := NewSSHKey()
	if k.Equal(k2) {
		t.Fatal("two new SSH keys are the same")
	}
	c.SSHKey = pemKey
	// A temporary file left by a crash, with a loose mode, must not
	// carry the keys out as readable.
	if err := os.WriteFile(p+".tmp", []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Save(p, c); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("profile mode %v, %v", fi.Mode(), err)
	}
	again, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if !again.RotatedSSHKey().Equal(k) || again.PrivateKey != c.PrivateKey {
		t.Fatal("the rotated SSH key did not survive a reload")
	}
	for name, bad := range map[string]string{
		"not PEM":    "garbage",
		"wrong key":  strings.Replace(pemKey, "PRIVATE KEY", "RSA PRIVATE KEY", 2),
		"two blocks": pemKey + pemKey,
		"bad body":   "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
	} {
		c.SSHKey = bad
		if err := Save(p, c); err != nil {
			t.Fatal(err)
		}
		if _, err := Load(p); err == nil || !strings.Contains(err.Error(), "ssh_key") {
			t.Errorf("%s: loaded (%v), want an error naming ssh_key", name, err)
		}
	}
}
