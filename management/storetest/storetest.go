// Package storetest opens real management stores on both engines for
// tests: SQLite in a temporary directory and PostgreSQL on a private server
// (internal/pgtest), each test getting an empty database.
package storetest

import (
	"context"
	"testing"

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
			return store.Config{Engine: store.Postgres, DSN: pg.NewDatabase(t)}
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
