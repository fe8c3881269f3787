// Package pgtest runs a private PostgreSQL server for tests: a fresh
// cluster in a temporary directory, listening only on a unix socket there,
// run as the postgres user when the tests run as root (initdb refuses root).
// It skips the test when PostgreSQL is not installed, unless
// WIREMESH_REQUIRE_POSTGRES=1 (as the project's test script sets), in which
// case that is a failure.
package pgtest

import (
	"context"
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

// Start initialises and starts a cluster that is stopped and removed when
// the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := findBin()
	if bin == "" {
		if os.Getenv("WIREMESH_REQUIRE_POSTGRES") == "1" {
			t.Fatal("PostgreSQL is not installed (no initdb); scripts/deps.sh installs it")
		}
		t.Skip("PostgreSQL is not installed (no initdb); set WIREMESH_PG_BIN or install postgresql")
	}
	dir, err := os.MkdirTemp("", "wmpg-")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			t.Fatalf("running as root needs a postgres user to run PostgreSQL: %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
		s.asUser = "postgres"
	}
	t.Cleanup(func() {
		_ = s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
		os.RemoveAll(dir)
	})
	if err := s.run("initdb", "-D", s.data(), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-locale", "--no-sync"); err != nil {
		t.Fatalf("initdb: %v", err)
	}
	s.StartAgain(t)
	return s
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
	opts := fmt.Sprintf("-c listen_addresses= -k %s -p %d -c max_connections=200", s.dir, port)
	if err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "30", "start"); err != nil {
		t.Fatalf("start postgres: %v\n%s", err, s.Log())
	}
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
	name := fmt.Sprintf("test%d", s.dbs.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatalf("create database: %v", err)
	}
	return s.DSN(name)
}
