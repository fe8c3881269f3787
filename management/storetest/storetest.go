// Package storetest opens real management stores on both engines for
// tests: SQLite in a temporary directory and PostgreSQL on a private server
// (internal/pgtest), each test getting an empty database.
package storetest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/pgtest"
	"github.com/wiremesh/wiremesh/management/store"
)

// Engine opens fresh stores on one engine.
type Engine struct {
	Name store.Engine
	// Config returns the configuration of a new, empty database.
	Config func(t testing.TB) store.Config
}

// Open opens (and migrates) a new empty store, closed when the test ends.
func (e Engine) Open(t testing.TB) *store.Store {
	t.Helper()
	st, err := store.Open(context.Background(), e.Config(t))
	if err != nil {
		t.Fatalf("open %s store: %v", e.Name, err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// Engines returns both engines. The Postgres server starts once, for the
// calling test, and serves every database it hands out.
func Engines(t testing.TB) []Engine {
	t.Helper()
	pg := pgtest.Start(t)
	return []Engine{
		{Name: store.SQLite, Config: func(t testing.TB) store.Config {
			return store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
		}},
		{Name: store.Postgres, Config: func(t testing.TB) store.Config {
			return store.Config{Engine: store.Postgres, DSN: pg.NewDatabase(t), DataDir: t.TempDir()}
		}},
	}
}

// Each runs fn as a subtest per engine.
func Each(t *testing.T, fn func(t *testing.T, e Engine)) {
	t.Helper()
	for _, e := range Engines(t) {
		t.Run(string(e.Name), func(t *testing.T) { fn(t, e) })
	}
}

// Shared hands out both engines to every test of a test binary from one
// private Postgres server, started on first use (a binary whose selected
// tests never reach Postgres starts none). Each Postgres store lives in its
// own database, dropped when its test ends. The test binary owns the
// server through TestMain:
//
//	var engines storetest.Shared
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		engines.Close()
//		os.Exit(code)
//	}
//
// A missing PostgreSQL skips the postgres subtests, or fails them with
// WIREMESH_REQUIRE_POSTGRES=1 (as CI sets).
type Shared struct {
	once sync.Once
	pg   *pgtest.Server
	err  error
}

// Engines returns both engines, SQLite first.
func (s *Shared) Engines() []Engine {
	return []Engine{
		{Name: store.SQLite, Config: func(t testing.TB) store.Config {
			return store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
		}},
		{Name: store.Postgres, Config: s.postgres},
	}
}

// Each runs fn as a subtest per engine, named after the engine
// ("sqlite", "postgres"): -run 'TestX/postgres' selects one.
func (s *Shared) Each(t *testing.T, fn func(t *testing.T, e Engine)) {
	t.Helper()
	for _, e := range s.Engines() {
		t.Run(string(e.Name), func(t *testing.T) { fn(t, e) })
	}
}

func (s *Shared) postgres(t testing.TB) store.Config {
	t.Helper()
	s.once.Do(func() { s.pg, s.err = pgtest.Launch() })
	switch {
	case errors.Is(s.err, pgtest.ErrNotInstalled) && !pgtest.Required():
		t.Skip(s.err)
	case s.err != nil:
		t.Fatal(s.err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name, err := s.pg.CreateDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.pg.DropDatabase(ctx, name); err != nil {
			t.Errorf("drop test database: %v", err)
		}
	})
	// DataDir as the binaries give it (it holds the key file sealing the
	// store's secrets; the Postgres engine does not use it).
	return store.Config{Engine: store.Postgres, DSN: s.pg.DSN(name), DataDir: t.TempDir()}
}

// Close stops the shared server, if one was started.
func (s *Shared) Close() {
	s.once.Do(func() {}) // no start after Close
	if s.pg != nil {
		s.pg.Close()
	}
}
