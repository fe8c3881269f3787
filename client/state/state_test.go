package state

import (
	"os"
	"path/filepath"
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
