package server_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/admin"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/store"
)

// upgradeFixture is a data directory written by the previous tagged
// release, v0.1.0 (store.db, its store-encryption.key and manifest.json
// naming what was created): scripts/upgrade-fixture.sh regenerates it.
const upgradeFixture = "testdata/upgrade/v0.1.0"

// fixture is manifest.json: what the previous release was given and
// answered, with the test secrets to use them again.
type fixture struct {
	Release       string `json:"release"`
	OwnerEmail    string `json:"owner_email"`
	OwnerPassword string `json:"owner_password"`
	OwnerID       string `json:"owner_id"`
	PAT           string `json:"pat"`
	SetupKey      string `json:"setup_key"`
	Peers         []struct {
		ID         string `json:"id"`
		Hostname   string `json:"hostname"`
		IP         string `json:"ip"`
		PrivateKey string `json:"private_key"`
	} `json:"peers"`
	Groups    []any `json:"groups"`
	Policies  []any `json:"policies"`
	SetupKeys []any `json:"setup_keys"`
}

// loadFixture copies the fixture's data directory to a temporary one
// (tests write to it) and reads its manifest.
func loadFixture(t *testing.T) (string, fixture) {
	t.Helper()
	var m fixture
	raw, err := os.ReadFile(filepath.Join(upgradeFixture, "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	dir := t.TempDir()
	for _, f := range []string{store.FileName, "store-encryption.key"} {
		b, err := os.ReadFile(filepath.Join(upgradeFixture, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, m
}

// runCommand runs a cobra command as its binary would, returning what it
// printed.
func runCommand(t *testing.T, cmd *cobra.Command, args ...string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx(t))
	return out.String(), err
}

// TestUpgradeFromPreviousRelease: `migrate` brings the previous release's
// store to this schema, and the server started on it keeps everything:
// the owner's password and token, the setup key, groups and policies, and
// the peers with their IDs, keys and addresses.
func TestUpgradeFromPreviousRelease(t *testing.T) {
	dir, m := loadFixture(t)
	old := schemaVersion(t, store.Config{Engine: store.SQLite, DataDir: dir}, false)
	current := schemaVersion(t, store.Config{Engine: store.SQLite, DataDir: t.TempDir()}, true)
	out, err := runCommand(t, admin.MigrateCommand(dir), "--datadir", dir)
	if err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	ver := regexp.MustCompile(`(?m)^sqlite store at schema version (\d+)$`).FindStringSubmatch(out)
	if ver == nil || ver[1] != fmt.Sprint(current) {
		t.Fatalf("migrate from schema version %d: want version %d, output: %s", old, current, out)
	}
	if n := strings.Count(out, "applied "); n != current-old {
		t.Fatalf("migrate from %d to %d applied %d migrations:\n%s", old, current, n, out)
	}
	// A second run has nothing left to apply.
	again, err := runCommand(t, admin.MigrateCommand(dir), "--datadir", dir)
	if err != nil || strings.Contains(again, "applied") || !strings.Contains(again, "schema version "+ver[1]) {
		t.Fatalf("second migrate: %v\n%s", err, again)
	}
	e := startWith(t, dir, server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	checkFixture(t, e, m)
}

// TestUpgradeThenMoveToPostgres moves the upgraded SQLite store into
// Postgres as docs/operations.md says (admin export, admin import with
// the same store encryption key) and starts the server on Postgres:
// nothing is lost.
func TestUpgradeThenMoveToPostgres(t *testing.T) {
	dir, m := loadFixture(t)
	dump := filepath.Join(t.TempDir(), "account.json")
	if out, err := runCommand(t, admin.Command(dir), "--datadir", dir, "export", "--out", dump); err != nil {
		t.Fatalf("export: %v\n%s", err, out)
	}
	pg := engines.Engines()[1].Config(t) // skips without PostgreSQL unless WIREMESH_REQUIRE_POSTGRES=1
	keyFile := filepath.Join(dir, "store-encryption.key")
	out, err := runCommand(t, admin.Command(""), "--store", "postgres", "--store-dsn", pg.DSN, "--store-encryption-key-file", keyFile, "import", dump)
	if err != nil || !strings.Contains(out, fmt.Sprintf("%d peers", len(m.Peers))) {
		t.Fatalf("import: %v\n%s", err, out)
	}
	k, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pg.SecretKey = strings.TrimSpace(string(k))
	e := startWith(t, pg.DataDir, server.Options{Store: pg, Identity: server.Identity{BuiltInIssuer: autoIssuer}})
	checkFixture(t, e, m)
}

// TestRestoreFromBackup: the documented restore (stop, put the backup in
// place of store.db, start) brings the state back to the backup's.
func TestRestoreFromBackup(t *testing.T) {
	dir, m := loadFixture(t)
	opts := server.Options{Identity: server.Identity{BuiltInIssuer: autoIssuer}}
	e := startWith(t, dir, opts)
	backup := filepath.Join(t.TempDir(), "store-backup.db")
	// Online: the server is running.
	if out, err := runCommand(t, admin.Command(dir), "--datadir", dir, "backup", "--out", backup); err != nil {
		t.Fatalf("backup: %v\n%s", err, out)
	}
	// Changes after the backup, which the restore must undo.
	owner := e.api("Token " + m.PAT)
	owner.call("POST", "/api/groups", map[string]any{"name": "after-backup"}, 200)
	late := testpeer.New(e.conn, "late")
	if _, err := late.Login(ctx(t), m.SetupKey); err != nil {
		t.Fatal(err)
	}
	if n := len(list(owner.call("GET", "/api/peers", nil, 200))); n != len(m.Peers)+1 {
		t.Fatalf("%d peers after the late registration", n)
	}
	e.stop()

	// Restore as documented: the WAL files of the old database go too.
	for _, f := range []string{store.FileName + "-wal", store.FileName + "-shm"} {
		if err := os.Remove(filepath.Join(dir, f)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, store.FileName), b, 0o600); err != nil {
		t.Fatal(err)
	}
	e = startWith(t, dir, opts)
	for _, g := range list(e.api("Token "+m.PAT).call("GET", "/api/groups", nil, 200)) {
		if obj(g)["name"] == "after-backup" {
			t.Fatal("a group created after the backup survived the restore")
		}
	}
	// The late peer is unknown again: it must register anew.
	if _, err := testpeer.WithKey(e.conn, "late", late.Priv).Login(ctx(t), ""); code(err) != codes.PermissionDenied {
		t.Fatalf("peer registered after the backup logs in after the restore: %v", err)
	}
	checkFixture(t, e, m)
}

// checkFixture checks that the server on an upgraded (or moved, or
// restored) fixture answers as the previous release did and lets its
// users and peers back in. It registers one more peer.
func checkFixture(t *testing.T, e *env, m fixture) {
	t.Helper()
	owner := e.api("Token " + m.PAT)
	me := obj(owner.call("GET", "/api/users/current", nil, 200))
	if me["id"] != m.OwnerID || me["role"] != "owner" || me["email"] != m.OwnerEmail {
		t.Fatalf("the previous release's token is %v, want owner %s", me, m.OwnerID)
	}
	// Everything the previous release answered is answered the same
	// (later releases may add fields).
	for _, c := range []struct {
		path string
		old  []any
	}{{"/api/groups", m.Groups}, {"/api/policies", m.Policies}, {"/api/setup-keys", m.SetupKeys}} {
		if len(c.old) == 0 {
			t.Fatalf("manifest holds no %s", c.path)
		}
		if err := subset(c.path, c.old, owner.call("GET", c.path, nil, 200)); err != nil {
			t.Error(err)
		}
	}
	// Migration 0020 gave the account an IPv6 range but, as NetBird leaves
	// upgraded accounts, no IPv6-enabled groups: IPv6 stays off.
	set := obj(obj(list(owner.call("GET", "/api/accounts", nil, 200))[0])["settings"])
	if r, err := netip.ParsePrefix(fmt.Sprint(set["network_range_v6"])); err != nil || r.Bits() != 64 || !netip.MustParsePrefix("fd00::/8").Contains(r.Addr()) ||
		len(set["ipv6_enabled_groups"].([]any)) != 0 {
		t.Errorf("upgraded IPv6 settings: network_range_v6 %v, ipv6_enabled_groups %v", set["network_range_v6"], set["ipv6_enabled_groups"])
	}
	listed := map[string]map[string]any{}
	for _, p := range list(owner.call("GET", "/api/peers", nil, 200)) {
		listed[obj(p)["id"].(string)] = obj(p)
	}
	for _, p := range m.Peers {
		ip, _, _ := strings.Cut(p.IP, "/")
		if l := listed[p.ID]; l == nil || l["ip"] != ip || l["hostname"] != p.Hostname {
			t.Errorf("peer %s (%s, %s): listed as %v", p.ID, p.Hostname, ip, l)
		}
		priv, err := key.ParsePrivate(p.PrivateKey)
		if err != nil {
			t.Fatal(err)
		}
		// Logging in again with its old key (no setup key): same address;
		// none in the IPv6 overlay, which is off, though it reports it.
		again := testpeer.WithKey(e.conn, p.Hostname, priv)
		again.IPv6 = true
		lr, err := again.Login(ctx(t), "")
		if err != nil {
			t.Fatalf("peer %s logs in with its old key: %v", p.Hostname, err)
		}
		if got := lr.GetPeerConfig().GetAddress(); got != p.IP {
			t.Errorf("peer %s: address %s, had %s", p.Hostname, got, p.IP)
		}
		if v6 := lr.GetPeerConfig().GetAddressV6(); len(v6) != 0 {
			t.Errorf("peer %s: address_v6 %x with IPv6 off", p.Hostname, v6)
		}
	}
	// The owner's password.
	tok := deviceLogin(t, testpeer.New(e.conn, "owner-device"), m.OwnerEmail, m.OwnerPassword)
	if me := obj(e.api("Bearer "+tok).call("GET", "/api/users/current", nil, 200)); me["id"] != m.OwnerID {
		t.Fatalf("password login is %v, want owner %s", me["id"], m.OwnerID)
	}
	// The setup key still registers, into its auto group.
	newPeer := testpeer.New(e.conn, "srv-new")
	if _, err := newPeer.Login(ctx(t), m.SetupKey); err != nil {
		t.Fatalf("the previous release's setup key: %v", err)
	}
	if n := len(list(owner.call("GET", "/api/peers", nil, 200))); n != len(m.Peers)+1 {
		t.Fatalf("%d peers after registering one more, want %d", n, len(m.Peers)+1)
	}
}

// schemaVersion opens a store (migrating it or not) and reports its
// schema version.
func schemaVersion(t *testing.T, c store.Config, migrate bool) int {
	t.Helper()
	open := store.OpenNoMigrate
	if migrate {
		open = store.Open
	}
	st, err := open(ctx(t), c)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v, err := st.SchemaVersion(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// subset reports where now differs from old: every field old had must
// be there with the same value; fields now adds are fine.
func subset(path string, old, now any) error {
	switch o := old.(type) {
	case map[string]any:
		n, ok := now.(map[string]any)
		if !ok {
			return fmt.Errorf("%s: %v, was an object", path, now)
		}
		for k, v := range o {
			if err := subset(path+"."+k, v, n[k]); err != nil {
				return err
			}
		}
		return nil
	case []any:
		n, ok := now.([]any)
		if !ok || len(n) != len(o) {
			return fmt.Errorf("%s: %v, was %v", path, now, old)
		}
		for i := range o {
			if err := subset(fmt.Sprintf("%s[%d]", path, i), o[i], n[i]); err != nil {
				return err
			}
		}
		return nil
	default:
		if !reflect.DeepEqual(old, now) {
			return fmt.Errorf("%s: %v, was %v", path, now, old)
		}
		return nil
	}
}
