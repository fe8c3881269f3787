// Command gen writes the upgrade fixture: it runs a previous release's
// netbird-server on a fresh data directory, sets it up through the public
// API (owner, personal access token, setup key, groups, a policy) and
// registers peers over gRPC, stops it, and keeps the data directory with a
// manifest of what the test must find again (passwords, tokens and peer
// keys: test secrets only).
//
// It lives under testdata (not built with the module) because it is built
// inside the previous release's source tree, against that release's
// internal/testpeer: scripts/upgrade-fixture.sh copies it there.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "modernc.org/sqlite"

	"github.com/wiremesh/wiremesh/internal/testpeer"
)

// Manifest is what the fixture holds, for the upgrade test.
type Manifest struct {
	Release       string          `json:"release"`
	OwnerEmail    string          `json:"owner_email"`
	OwnerPassword string          `json:"owner_password"`
	OwnerID       string          `json:"owner_id"`
	PAT           string          `json:"pat"`
	SetupKey      string          `json:"setup_key"`
	Peers         []Peer          `json:"peers"`
	Groups        json.RawMessage `json:"groups"`   // GET /api/groups as the release answered
	Policies      json.RawMessage `json:"policies"` // GET /api/policies as the release answered
	SetupKeys     json.RawMessage `json:"setup_keys"`
}

// Peer is a registered peer and the private key it logs in with.
type Peer struct {
	ID         string `json:"id"`
	Hostname   string `json:"hostname"`
	IP         string `json:"ip"`
	PrivateKey string `json:"private_key"`
}

// farFuture replaces the token's expiry: the API caps it at a year, and
// the fixture must not age out of the test. (The setup key never expires.)
var farFuture = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()

func main() {
	bin := flag.String("server", "", "the previous release's netbird-server binary")
	out := flag.String("out", "", "directory to write store.db, store-encryption.key and manifest.json into")
	release := flag.String("release", "", "release name recorded in the manifest (e.g. v0.1.0)")
	flag.Parse()
	if *bin == "" || *out == "" || *release == "" {
		log.Fatal("usage: gen -server BIN -out DIR -release vX.Y.Z")
	}
	if err := run(*bin, *out, *release); err != nil {
		log.Fatal(err)
	}
}

func run(bin, out, release string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "upgrade-fixture-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	cmd := exec.Command(bin, "--datadir", dir, "--listen", addr, "--owner-email", "", "--stun-port", "0", "--disable-relay", "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", bin, err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		return cmd.Wait()
	}
	defer stop()

	m := Manifest{Release: release, OwnerEmail: "owner@example.com", OwnerPassword: "Upgrade-passw0rd!"}
	base := "http://" + addr
	if err := waitUp(ctx, base); err != nil {
		return err
	}
	var setup struct {
		UserID string `json:"user_id"`
		PAT    string `json:"personal_access_token"`
	}
	if err := call(ctx, base, "", "POST", "/api/setup", map[string]any{"email": m.OwnerEmail, "password": m.OwnerPassword, "name": "Owner",
		"create_pat": true, "pat_expire_in": 365}, &setup); err != nil {
		return err
	}
	m.OwnerID, m.PAT = setup.UserID, setup.PAT
	var servers, laptops struct {
		ID string `json:"id"`
	}
	if err := call(ctx, base, m.PAT, "POST", "/api/groups", map[string]any{"name": "servers"}, &servers); err != nil {
		return err
	}
	if err := call(ctx, base, m.PAT, "POST", "/api/groups", map[string]any{"name": "laptops"}, &laptops); err != nil {
		return err
	}
	if err := call(ctx, base, m.PAT, "POST", "/api/policies", map[string]any{"name": "laptops to servers ssh", "description": "upgrade fixture", "enabled": true,
		"rules": []map[string]any{{"name": "ssh", "enabled": true, "action": "accept", "bidirectional": false, "protocol": "tcp", "ports": []string{"22"},
			"sources": []string{laptops.ID}, "destinations": []string{servers.ID}}}}, nil); err != nil {
		return err
	}
	var key struct {
		Key string `json:"key"`
	}
	if err := call(ctx, base, m.PAT, "POST", "/api/setup-keys", map[string]any{"name": "upgrade", "type": "reusable", "expires_in": 0,
		"auto_groups": []string{servers.ID}, "usage_limit": 0}, &key); err != nil {
		return err
	}
	m.SetupKey = key.Key

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, h := range []string{"srv-1", "srv-2", "laptop-1"} {
		p := testpeer.New(conn, h)
		lr, err := p.Login(ctx, m.SetupKey)
		if err != nil {
			return fmt.Errorf("register %s: %w", h, err)
		}
		m.Peers = append(m.Peers, Peer{Hostname: h, IP: lr.GetPeerConfig().GetAddress(), PrivateKey: p.Priv.String()})
	}
	var peers []struct{ ID, Hostname string }
	if err := call(ctx, base, m.PAT, "GET", "/api/peers", nil, &peers); err != nil {
		return err
	}
	for i := range m.Peers {
		for _, p := range peers {
			if p.Hostname == m.Peers[i].Hostname {
				m.Peers[i].ID = p.ID
			}
		}
		if m.Peers[i].ID == "" {
			return fmt.Errorf("peer %s not listed", m.Peers[i].Hostname)
		}
	}
	if err := call(ctx, base, m.PAT, "PUT", "/api/groups/"+laptops.ID, map[string]any{"name": "laptops", "peers": []string{m.Peers[2].ID}}, nil); err != nil {
		return err
	}
	for _, g := range []struct {
		path string
		dst  *json.RawMessage
	}{{"/api/groups", &m.Groups}, {"/api/policies", &m.Policies}, {"/api/setup-keys", &m.SetupKeys}} {
		if err := call(ctx, base, m.PAT, "GET", g.path, nil, g.dst); err != nil {
			return err
		}
	}
	if err := stop(); err != nil {
		return fmt.Errorf("server did not stop cleanly: %w", err)
	}
	if err := settle(ctx, filepath.Join(dir, "store.db")); err != nil {
		return err
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, f := range []string{"store.db", "store-encryption.key"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(out, f), b, 0o600); err != nil {
			return err
		}
	}
	j, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "manifest.json"), append(j, '\n'), 0o644)
}

// settle moves the token's expiry far out and folds
// the WAL into the database file, so store.db alone is the whole state.
func settle(ctx context.Context, path string) error {
	db, err := sql.Open("sqlite", path)
	if err != nil {
		return err
	}
	defer db.Close()
	for _, q := range []string{
		fmt.Sprintf("UPDATE personal_access_tokens SET expires_at = %d", farFuture),
		"PRAGMA wal_checkpoint(TRUNCATE)",
		"PRAGMA journal_mode=DELETE",
		"VACUUM",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("%s: %w", q, err)
		}
	}
	return nil
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitUp(ctx context.Context, base string) error {
	for {
		resp, err := http.Get(base + "/api/instance")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("server at %s did not come up: %v", base, err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func call(ctx context.Context, base, pat, method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if pat != "" {
		req.Header.Set("Authorization", "Token "+pat)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != 200 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, raw)
	}
	if out == nil {
		return nil
	}
	if r, ok := out.(*json.RawMessage); ok {
		*r = append(json.RawMessage(nil), raw...)
		return nil
	}
	return json.Unmarshal(raw, out)
}
