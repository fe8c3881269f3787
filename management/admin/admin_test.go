package admin

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

func storeArgs(c store.Config) []string {
	if c.Engine == store.Postgres {
		return []string{"--datadir", "/nonexistent", "--store", "postgres", "--store-dsn", c.DSN}
	}
	return []string{"--datadir", c.DataDir}
}

func run(t *testing.T, c store.Config, args ...string) (string, error) {
	t.Helper()
	cmd := Command("/nonexistent")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(append(storeArgs(c), args...))
	err := cmd.ExecuteContext(context.Background())
	return out.String(), err
}

func mustRun(t *testing.T, c store.Config, args ...string) string {
	t.Helper()
	out, err := run(t, c, args...)
	if err != nil {
		t.Fatalf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// TestAdminBothEngines drives the admin command on each engine: setup keys,
// a registration, JSON listings, export from one engine and import into
// the other.
func TestAdminBothEngines(t *testing.T) {
	engines := storetest.Engines(t)
	cfgs := map[store.Engine]store.Config{}
	for _, e := range engines {
		cfgs[e.Name] = e.Config(t)
	}
	for _, e := range engines {
		t.Run(string(e.Name), func(t *testing.T) {
			c := cfgs[e.Name]
			out := mustRun(t, c, "setup-keys", "create", "--name", "ci", "--reusable", "--usage-limit", "3")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			secret := lines[len(lines)-1]

			var keys []map[string]any
			if err := json.Unmarshal([]byte(mustRun(t, c, "setup-keys", "list", "--json")), &keys); err != nil {
				t.Fatal(err)
			}
			if len(keys) != 1 {
				t.Fatalf("%d keys listed", len(keys))
			}
			k := keys[0]
			if k["name"] != "ci" || k["type"] != "reusable" || k["state"] != "valid" || k["used_times"] != 0.0 || k["key"] != secret[:8] || k["id"] == "" {
				t.Fatalf("listed key %v (secret starts %s)", k, secret[:8])
			}
			if strings.Contains(mustRun(t, c, "setup-keys", "list", "--json"), secret) {
				t.Fatal("the listing shows the whole secret")
			}

			// Register a peer with the key, as Login does.
			st, err := store.Open(context.Background(), c)
			if err != nil {
				t.Fatal(err)
			}
			pk, _ := key.NewPrivate()
			svc := peers.New(st, offline{}, nil, nil)
			p, _, err := svc.Login(context.Background(), peers.LoginInput{Key: pk.Public(), SetupKey: secret, Meta: account.Meta{Hostname: "box"}})
			st.Close()
			if err != nil {
				t.Fatal(err)
			}
			var ps []peerView
			if err := json.Unmarshal([]byte(mustRun(t, c, "peers", "list", "--json")), &ps); err != nil {
				t.Fatal(err)
			}
			if len(ps) != 1 || ps[0].ID != string(p.ID) || ps[0].IP != p.IP.String() {
				t.Fatalf("peers %+v", ps)
			}

			if out, err := run(t, c, "setup-keys", "revoke", "no-such-key"); err == nil || !strings.Contains(err.Error(), "no setup key") {
				t.Fatalf("revoke of an unknown key: %v %s", err, out)
			}
			mustRun(t, c, "setup-keys", "revoke", k["id"].(string))
			_ = json.Unmarshal([]byte(mustRun(t, c, "setup-keys", "list", "--json")), &keys)
			if keys[0]["state"] != "revoked" || keys[0]["used_times"] != 1.0 {
				t.Fatalf("after revoke: %v", keys[0])
			}

			// Export, then import into the other engine's store.
			dump := filepath.Join(t.TempDir(), "acc.json")
			mustRun(t, c, "export", "--out", dump)
			other := engines[0].Config(t)
			if e.Name == other.Engine {
				other = engines[1].Config(t)
			}
			mustRun(t, other, "import", dump)
			if out, err := run(t, other, "import", dump); err == nil || !strings.Contains(err.Error(), "nothing was imported") {
				t.Fatalf("second import: %v %s", err, out)
			}
			var d store.Dump
			b, _ := os.ReadFile(dump)
			_ = json.Unmarshal(b, &d)
			var imported []peerView
			_ = json.Unmarshal([]byte(mustRun(t, other, "--account", string(d.Account.ID), "peers", "list", "--json")), &imported)
			if len(imported) != 1 || imported[0].Key != p.Key.String() || imported[0].IP != p.IP.String() {
				t.Fatalf("imported peers %+v", imported)
			}
			st2, err := store.Open(context.Background(), other)
			if err != nil {
				t.Fatal(err)
			}
			defer st2.Close()
			// The imported peer authenticates with its key on the new store.
			if _, _, err := peers.New(st2, offline{}, nil, nil).Login(context.Background(), peers.LoginInput{Key: pk.Public()}); err != nil {
				t.Fatalf("imported peer cannot log in: %v", err)
			}
			var evs []account.Event
			_ = json.Unmarshal([]byte(mustRun(t, other, "--account", string(d.Account.ID), "events", "--limit", "0")), &evs)
			if len(evs) != 3 || evs[0].Activity != "setupkey.revoke" || evs[2].Activity != "setupkey.add" {
				t.Fatalf("imported events %+v", evs)
			}
		})
	}
}

func TestBackupSQLite(t *testing.T) {
	c := store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
	mustRun(t, c, "setup-keys", "create", "--name", "before-backup")
	file := filepath.Join(t.TempDir(), "backup.db")
	mustRun(t, c, "backup", "--out", file)
	if _, err := run(t, c, "backup", "--out", file); err == nil {
		t.Fatal("backup overwrote an existing file")
	}
	restored := t.TempDir()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, store.FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	out := mustRun(t, store.Config{Engine: store.SQLite, DataDir: restored}, "setup-keys", "list")
	if !strings.Contains(out, "before-backup") {
		t.Fatalf("restored backup lists:\n%s", out)
	}
}

func TestMigrateCommand(t *testing.T) {
	dir := t.TempDir()
	cmd := MigrateCommand("/nonexistent")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--datadir", dir})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "applied 0001_init") || !strings.Contains(out.String(), "schema version") {
		t.Fatalf("migrate printed:\n%s", out.String())
	}
}

// Accounts made by the admin command are separate tenants: a setup key of
// one registers into it, and listings follow --account.
func TestAccountsCommand(t *testing.T) {
	c := store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
	id := strings.TrimSpace(mustRun(t, c, "accounts", "create"))
	if len(id) != 36 {
		t.Fatalf("account ID %q", id)
	}
	mustRun(t, c, "setup-keys", "create", "--reusable")
	mustRun(t, c, "--account", id, "setup-keys", "create", "--reusable")
	listed := mustRun(t, c, "accounts", "list")
	if strings.Count(listed, "\n") != 2 || !strings.Contains(listed, id) {
		t.Fatalf("accounts list:\n%s", listed)
	}
	var mine, def []map[string]any
	_ = json.Unmarshal([]byte(mustRun(t, c, "--account", id, "setup-keys", "list", "--json")), &mine)
	_ = json.Unmarshal([]byte(mustRun(t, c, "setup-keys", "list", "--json")), &def)
	if len(mine) != 1 || len(def) != 1 || mine[0]["id"] == def[0]["id"] {
		t.Fatalf("keys not per account: %v / %v", mine, def)
	}
}
