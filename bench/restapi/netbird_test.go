package restapi

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	_ "modernc.org/sqlite"

	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/management/auth"
)

// Facts of NetBird's own test store (management/server/testdata/store.sql
// in its source), which the baseline starts from: its account, All group
// and Default policy. Its account network is 100.64.0.0/16.
const (
	nbAccount       = "bf1c8084-ba50-4ce7-9439-34653001fc3b"
	nbAllGroup      = "cs1tnh0hhcjnqoiuebeg"
	nbDefaultPolicy = "cs1tnh0hhcjnqoiuebf0"
	nbEncryptionKey = "X4p7yb1ZUFn/Ql4uvljxYQgqk8ZyhRDvKDl0ss5MBJc="
)

var nbNetwork = netip.MustParsePrefix("100.64.0.0/16")

// startNetBird starts NetBird's combined server (bin) on a SQLite store
// holding the dataset and returns its URL and a personal access token of
// the dataset's owner. The store starts as NetBird's test store; a first
// start migrates it to the current schema, the dataset is then written by
// SQL, and the server starts again on it.
func startNetBird(t *testing.T, bin, src string, d dataset) (string, string, *proctest.Proc) {
	t.Helper()
	dir := t.TempDir()
	dump, err := os.ReadFile(filepath.Join(src, "management/server/testdata/store.sql"))
	if err != nil {
		t.Fatal(err)
	}
	db := openSQLite(t, filepath.Join(dir, "store.db"))
	if _, err := db.Exec(string(dump)); err != nil {
		t.Fatalf("load NetBird's test store: %v", err)
	}
	db.Close()
	// Its geolocation databases: the server will not start without them.
	for _, f := range []string{"GeoLite2-City_20240305.mmdb", "geonames_20240305.db"} {
		b, err := os.ReadFile(filepath.Join(src, "management/server/testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	port := freePort(t)
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	cfg := fmt.Sprintf(`server:
  listenAddress: "127.0.0.1:%d"
  exposedAddress: "%s"
  stunPorts: [%d]
  metricsPort: %d
  healthcheckAddress: "127.0.0.1:%d"
  logLevel: "warn"
  logFile: "console"
  authSecret: "bench-relay-secret"
  dataDir: "%s"
  disableAnonymousMetrics: true
  disableGeoliteUpdate: true
  auth:
    issuer: "%s/oauth2"
    cliRedirectURIs: ["http://localhost:53000/"]
  store:
    engine: "sqlite"
    encryptionKey: "%s"
`, port, url, freeUDPPort(t), freePort(t), freePort(t), dir, url, nbEncryptionKey)
	cfgPath := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() *proctest.Proc {
		return proctest.StartCmd(t, exec.Command(bin, "--config", cfgPath), nil)
	}
	first := start()
	waitHTTP(t, url+"/api/peers", "", first, 401)
	first.Stop()

	token, hash := nbToken(t)
	t0 := time.Now()
	seedNetBird(t, dir, d, hash)
	t.Logf("NetBird store seeded by SQL in %v", time.Since(t0).Round(time.Millisecond))
	srv := start()
	waitHTTP(t, url+"/api/users", token, srv, 200)
	return url, token, srv
}

// nbToken makes a personal access token in NetBird's format (which is
// ours: "nbp_", 30 base62 characters, a 6-character base62 CRC32 of them)
// and the SHA-256 base64 hash NetBird looks it up by.
func nbToken(t *testing.T) (string, string) {
	plain, hash, err := auth.NewPAT()
	if err != nil {
		t.Fatal(err)
	}
	return plain, hash
}

func openSQLite(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// nbEncrypt encrypts a user's name or e-mail as NetBird stores them:
// AES-256-GCM under the store's encryption key, base64 of nonce and
// ciphertext.
func nbEncrypt(t *testing.T, s string) string {
	if s == "" {
		return ""
	}
	k, err := base64.StdEncoding.DecodeString(nbEncryptionKey)
	if err != nil {
		t.Fatal(err)
	}
	b, err := aes.NewCipher(k)
	if err != nil {
		t.Fatal(err)
	}
	g, err := cipher.NewGCM(b)
	if err != nil {
		t.Fatal(err)
	}
	nonce := make([]byte, g.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(g.Seal(nonce, nonce, []byte(s), nil))
}

func nbTime(tm time.Time) string { return tm.UTC().Format("2006-01-02 15:04:05.999999999-07:00") }

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// seedNetBird writes the dataset into NetBird's migrated store by SQL, in
// its schema (columns as its gorm models name them), in one transaction.
func seedNetBird(t *testing.T, dir string, d dataset, tokenHash string) {
	t.Helper()
	db := openSQLite(t, filepath.Join(dir, "store.db"))
	defer db.Close()
	tx, err := db.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := tx.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q[:min(len(q), 60)], err)
		}
	}
	// The test store's own objects go, but for its account, All group and
	// Default policy (switched off, as on our side).
	for _, q := range []string{"DELETE FROM group_peers", "DELETE FROM peers", "DELETE FROM network_routers", "DELETE FROM network_resources", "DELETE FROM networks",
		"DELETE FROM personal_access_tokens", "DELETE FROM users", "DELETE FROM setup_keys"} {
		exec(q)
	}
	exec("UPDATE policies SET enabled = 0 WHERE id = ?", nbDefaultPolicy)
	exec("UPDATE accounts SET created_by = ? WHERE id = ?", d.ownerID(), nbAccount)
	base := nbTime(d.base)
	for u := range d.users {
		role, service := "user", false
		switch {
		case u == 0:
			role = "owner"
		case u < 10:
			role = "admin"
		case u < 20:
			service = true
		}
		name, email, serviceName := fmt.Sprintf("User %d", u), fmt.Sprintf("user%d@example.com", u), ""
		if service {
			serviceName, email = name, ""
		}
		exec(`INSERT INTO users (id, account_id, role, is_service_user, non_deletable, service_user_name, auto_groups, blocked, last_login, created_at, issued,
			integration_ref_id, integration_ref_integration_type, name, email, pending_approval) VALUES (?, ?, ?, ?, 0, ?, '[]', 0, NULL, ?, 'api', 0, '', ?, ?, 0)`,
			d.userID(u), nbAccount, role, service, serviceName, base, nbEncrypt(t, name), nbEncrypt(t, email))
	}
	exec(`INSERT INTO personal_access_tokens (id, user_id, name, hashed_token, expiration_date, created_by, created_at, last_used) VALUES (?, ?, ?, ?, ?, ?, ?, NULL)`,
		"bench-token", d.ownerID(), "bench", tokenHash, nbTime(time.Now().AddDate(1, 0, 0)), d.ownerID(), base)
	for k := range d.setupKeys {
		plain := strings.ToUpper(uuid.NewString())
		sum := sha256.Sum256([]byte(plain))
		typ := "one-off"
		if k%2 == 0 {
			typ = "reusable"
		}
		exec(`INSERT INTO setup_keys (id, account_id, key, name, type, created_at, expires_at, updated_at, revoked, used_times, last_used, auto_groups, usage_limit,
			ephemeral, key_secret, allow_extra_dns_labels) VALUES (?, ?, ?, ?, ?, ?, ?, ?, 0, 0, NULL, ?, 0, 0, ?, 0)`,
			d.keyID(k), nbAccount, base64.StdEncoding.EncodeToString(sum[:]), fmt.Sprintf("key-%d", k), typ, base, nbTime(d.base.AddDate(0, 0, 30)), base,
			jsonText([]string{d.groupID(k % d.groups)}), plain[:5]+"****")
	}
	peerStmt, err := tx.Prepare(`INSERT INTO peers (id, account_id, key, setup_key, ip, meta_hostname, meta_go_os, meta_kernel, meta_core, meta_platform, meta_os,
		meta_os_version, meta_wt_version, meta_ui_version, meta_kernel_version, meta_network_addresses, meta_system_serial_number, meta_system_product_name,
		meta_system_manufacturer, meta_environment, meta_files, name, dns_label, peer_status_last_seen, peer_status_connected, peer_status_login_expired,
		peer_status_requires_approval, user_id, ssh_key, ssh_enabled, login_expiration_enabled, last_login, created_at, ephemeral, location_country_code,
		location_city_name, location_geo_name_id, location_connection_ip, peer_status_session_started_at, ipv6, extra_dns_labels, allow_extra_dns_labels,
		inactivity_expiration_enabled)
		VALUES (?, ?, ?, ?, ?, ?, 'linux', 'Linux', '', '', 'Debian GNU/Linux', '12', '0.77.1', '', '6.1.0', '', '', '', '', '', '', ?, ?, ?, 0, 0, 0, ?, '', 0, ?, ?, ?, 0,
		'', '', 0, ?, 0, '', '[]', 0, 0)`)
	if err != nil {
		t.Fatal(err)
	}
	for i := range d.peers {
		user, setupKey := "", ""
		if u := d.peerUser(i); u >= 0 {
			user = d.userID(u)
		} else {
			setupKey = d.keyID(i % d.setupKeys)
		}
		if _, err := peerStmt.Exec(d.peerID(i), nbAccount, d.keys[i].String(), setupKey, jsonText(d.peerIP(nbNetwork, i).String()), d.hostname(i),
			d.hostname(i), d.hostname(i), nbTime(d.base.Add(time.Duration(i)*time.Second)), user, user != "", base, base, `"192.0.2.1"`); err != nil {
			t.Fatalf("peer %d: %v", i, err)
		}
	}
	memberStmt, err := tx.Prepare(`INSERT INTO group_peers (account_id, group_id, peer_id) VALUES (?, ?, ?)`)
	if err != nil {
		t.Fatal(err)
	}
	member := func(g, p string) {
		if _, err := memberStmt.Exec(nbAccount, g, p); err != nil {
			t.Fatalf("group member: %v", err)
		}
	}
	for i := range d.peers {
		member(nbAllGroup, d.peerID(i))
	}
	for g := range d.groups {
		exec(`INSERT INTO groups (id, account_id, name, issued, integration_ref_id, integration_ref_integration_type, public_id, resources) VALUES (?, ?, ?, 'api', 0, '', ?, NULL)`,
			d.groupID(g), nbAccount, fmt.Sprintf("group-%04d", g), d.groupID(g))
		for _, i := range d.members(g) {
			member(d.groupID(g), d.peerID(i))
		}
	}
	for j := range d.policies {
		src, dst, bidi := d.policy(j)
		exec(`INSERT INTO policies (id, account_id, name, description, enabled, source_posture_checks, public_id) VALUES (?, ?, ?, '', 1, '[]', ?)`,
			d.policyID(j), nbAccount, fmt.Sprintf("policy-%04d", j), d.policyID(j))
		exec(`INSERT INTO policy_rules (id, policy_id, name, description, enabled, action, destinations, sources, bidirectional, protocol, ports, port_ranges)
			VALUES (?, ?, ?, '', 1, 'accept', ?, ?, ?, 'tcp', '["22"]', '[]')`,
			d.ruleID(j), d.policyID(j), fmt.Sprintf("rule-%04d", j), jsonText([]string{d.groupID(dst)}), jsonText([]string{d.groupID(src)}), bidi)
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}

	// Its activity log lives in a database of its own.
	ev := openSQLite(t, filepath.Join(dir, "events.db"))
	defer ev.Close()
	etx, err := ev.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer etx.Rollback()
	for e := range d.events {
		meta := jsonText(map[string]string{"fqdn": d.hostname(e%d.peers) + ".test.com", "setup_key_name": "key-0"})
		if _, err := etx.Exec(`INSERT INTO events (timestamp, activity, initiator_id, target_id, account_id, meta) VALUES (?, 1, ?, ?, ?, ?)`,
			nbTime(d.base.Add(time.Duration(e)*time.Second)), d.ownerID(), d.peerID(e%d.peers), nbAccount, meta); err != nil {
			t.Fatalf("event %d: %v", e, err)
		}
	}
	if err := etx.Commit(); err != nil {
		t.Fatal(err)
	}
}
