package storeflag

import (
	"os"
	"testing"

	"github.com/spf13/pflag"

	"github.com/wiremesh/wiremesh/internal/flagconf"
	"github.com/wiremesh/wiremesh/management/store"
)

func resolve(t *testing.T, args []string, env map[string]string) (store.Config, error) {
	t.Helper()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	f := Bind(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Config("/data", func(k string) string { return env[k] })
}

func TestPrecedence(t *testing.T) {
	c, err := resolve(t, nil, nil)
	if err != nil || c.Engine != store.SQLite || c.DataDir != "/data" {
		t.Fatalf("default: %+v %v", c, err)
	}
	c, err = resolve(t, nil, map[string]string{EnvEngine: "postgres", EnvDSN: "host=/tmp"})
	if err != nil || c.Engine != store.Postgres || c.DSN != "host=/tmp" {
		t.Fatalf("env: %+v %v", c, err)
	}
	c, err = resolve(t, []string{"--store", "sqlite"}, map[string]string{EnvEngine: "postgres", EnvDSN: "host=/tmp"})
	if err != nil || c.Engine != store.SQLite {
		t.Fatalf("flag over env: %+v %v", c, err)
	}
	c, err = resolve(t, []string{"--store-dsn", "host=/x"}, map[string]string{EnvEngine: "postgres", EnvDSN: "host=/tmp"})
	if err != nil || c.DSN != "host=/x" {
		t.Fatalf("dsn flag over env: %+v %v", c, err)
	}
}

func TestErrors(t *testing.T) {
	if _, err := resolve(t, []string{"--store", "postgres"}, nil); err == nil {
		t.Fatal("postgres without DSN accepted")
	}
	if _, err := resolve(t, []string{"--store", "mysql"}, nil); err == nil {
		t.Fatal("unknown engine accepted")
	}
	if _, err := resolve(t, []string{"--store-dsn", "host=/x"}, nil); err == nil {
		t.Fatal("a DSN with the sqlite store accepted")
	}
}

// The DSN (with its password) can come from a file, out of ps.
func TestDSNFromFile(t *testing.T) {
	p := t.TempDir() + "/dsn"
	if err := os.WriteFile(p, []byte("postgres://u:secret@db/x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := resolve(t, []string{"--store", "postgres", "--store-dsn-file", p}, map[string]string{EnvDSN: "host=/env"})
	if err != nil || c.DSN != "postgres://u:secret@db/x" {
		t.Fatalf("dsn file: %+v %v", c, err)
	}
	if _, err := resolve(t, []string{"--store-dsn-file", p}, nil); err == nil {
		t.Fatal("a DSN file with the sqlite store accepted")
	}
	if _, err := resolve(t, []string{"--store", "postgres", "--store-dsn", "x", "--store-dsn-file", p}, nil); err == nil {
		t.Fatal("both --store-dsn and --store-dsn-file accepted")
	}
}

// TestEncryptionKey: --store-encryption-key, its file and its environment
// variable reach the config; a malformed key is refused at start.
func TestEncryptionKey(t *testing.T) {
	const key = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=" // 32 bytes, base64
	c, err := resolve(t, []string{"--store-encryption-key", key, "--store-encryption-key-lost"}, nil)
	if err != nil || c.SecretKey != key || !c.ForgetLostSecretKey {
		t.Fatalf("flag: %+v %v", c, err)
	}
	file := t.TempDir() + "/key"
	if err := os.WriteFile(file, []byte(key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if c, err = resolve(t, []string{"--store-encryption-key-file", file}, nil); err != nil || c.SecretKey != key {
		t.Fatalf("file: %+v %v", c, err)
	}
	if c, err = resolve(t, nil, nil); err != nil || c.SecretKey != "" {
		t.Fatalf("none: %+v %v", c, err)
	}
	if _, err = resolve(t, []string{"--store-encryption-key", "too-short"}, nil); err == nil {
		t.Fatal("a malformed key was accepted")
	}
}

// TestConfiguredThroughFlagconf: NetBird's variable names beat a config
// file's store settings when the command reads them through flagconf.
func TestConfiguredThroughFlagconf(t *testing.T) {
	cfg := t.TempDir() + "/config.yaml"
	if err := os.WriteFile(cfg, []byte("store: sqlite\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"NB_CONFIG": cfg, EnvEngine: "postgres", EnvDSN: "host=/run/pg"}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String(flagconf.ConfigFlag, "", "")
	f := Bind(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if err := flagconf.Apply(fs, func(k string) (string, bool) { v, ok := env[k]; return v, ok }); err != nil {
		t.Fatal(err)
	}
	c, err := f.Config("/data", func(string) string { return "" })
	if err != nil || c.Engine != store.Postgres || c.DSN != "host=/run/pg" {
		t.Fatalf("%+v %v", c, err)
	}
}
