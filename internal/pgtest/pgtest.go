// Package pgtest runs a private PostgreSQL server for tests: a fresh
// cluster in a temporary directory, listening only on a unix socket there,
// run as the postgres user when the tests run as root (initdb refuses root).
// It skips the test when PostgreSQL is not installed, unless
// WIREMESH_REQUIRE_POSTGRES=1 (as the project's test script sets), in which
// case that is a failure.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is a running private cluster.
type Server struct {
	bin, dir string
	asUser   string // "" when we are not root
	dbs      atomic.Int64
}

const port = 5432 // on the private socket directory only: no collisions

func findBin() string {
	if b := os.Getenv("WIREMESH_PG_BIN"); b != "" {
		return b
	}
	m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	sort.Strings(m)
	if len(m) > 0 {
		return filepath.Dir(m[len(m)-1])
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	return ""
}

// ErrNotInstalled is returned by Launch when no PostgreSQL binaries are
// found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no initdb); set WIREMESH_PG_BIN or install postgresql (scripts/deps.sh)")

// Required reports whether a missing PostgreSQL is a failure rather than a
// reason to skip (WIREMESH_REQUIRE_POSTGRES=1, as the project's test script
// sets).
func Required() bool { return os.Getenv("WIREMESH_REQUIRE_POSTGRES") == "1" }

// Start initialises and starts a cluster that is stopped and removed when
// the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := Launch()
	if errors.Is(err, ErrNotInstalled) {
		if Required() {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Launch initialises and starts a cluster without a test to own it (for a
// server shared by a whole test binary); the caller must Close it.
func Launch() (*Server, error) {
	bin := findBin()
	if bin == "" {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "wmpg-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	s := &Server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("running as root needs a postgres user to run PostgreSQL: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("chown %s: %w", dir, err)
		}
		s.asUser = "postgres"
	}
	if err := s.run("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("initdb: %w", err)
	}
	if err := s.start(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Close stops the server and removes its files.
func (s *Server) Close() {
	_ = s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
	os.RemoveAll(s.dir)
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) run(name string, args ...string) error {
	path := filepath.Join(s.bin, name)
	var cmd *exec.Cmd
	if s.asUser != "" {
		cmd = exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.Command(path, args...)
	}
	cmd.Dir = s.dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// StartAgain starts the (stopped) server.
func (s *Server) StartAgain(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

func (s *Server) start() error {
	opts := fmt.Sprintf("-c listen_addresses= -k %s -p %d -c max_connections=200", s.dir, port)
	if err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "30", "start"); err != nil {
		return fmt.Errorf("start postgres: %w\n%s", err, s.Log())
	}
	return nil
}

// Stop shuts the server down; fast mode disconnects clients as a restart
// or failover does.
func (s *Server) Stop(t testing.TB) {
	t.Helper()
	if err := s.run("pg_ctl", "-D", s.data(), "-m", "fast", "-w", "stop"); err != nil {
		t.Fatalf("stop postgres: %v", err)
	}
}

// Log returns the server log.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "log"))
	return string(b)
}

// DSN is the connection string of a database on this server.
func (s *Server) DSN(db string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", s.dir, port, db)
}

// NewDatabase creates an empty database and returns its DSN.
func (s *Server) NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, err := s.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s.DSN(name)
}

// CreateDatabase creates an empty database with a new name.
func (s *Server) CreateDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("test%d", s.dbs.Add(1))
	return name, s.admin(ctx, "CREATE DATABASE "+name)
}

// DropDatabase drops a database, ending the sessions still connected to it.
func (s *Server) DropDatabase(ctx context.Context, name string) error {
	return s.admin(ctx, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)")
}

func (s *Server) admin(ctx context.Context, sql string) error {
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, sql); err != nil {
		return fmt.Errorf("%s: %w", sql, err)
	}
	return nil
}
