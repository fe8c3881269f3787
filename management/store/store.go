// Package store persists management state behind one contract with two
// engines: an embedded SQLite database (modernc.org/sqlite, no cgo), the
// single-node default, and PostgreSQL through pgx/v5 for production and for
// several management instances sharing one database. Both run the same SQL
// (written with ? placeholders; the Postgres engine renumbers them) and the
// same embedded, forward-only migrations.
//
// Rows of one account are reached only through an AccountTx, whose every
// query is bound to that account's ID; the few lookups that cross accounts
// (a peer by its WireGuard key, a setup key by its hash) exist for
// authentication and return the owning account with the row.
package store

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"
)

// Errors callers check with errors.Is.
var (
	ErrNotFound    = errors.New("not found")
	ErrConflict    = errors.New("conflicts with existing data")
	ErrUnavailable = errors.New("store unavailable")
)

// Engine names a database implementation.
type Engine string

// The engines.
const (
	SQLite   Engine = "sqlite"
	Postgres Engine = "postgres"
)

// ParseEngine accepts the names NetBird's deployments use too.
func ParseEngine(s string) (Engine, error) {
	switch s {
	case "", "sqlite", "sqlite3":
		return SQLite, nil
	case "postgres", "postgresql", "pg":
		return Postgres, nil
	}
	return "", fmt.Errorf("unknown store engine %q (want sqlite or postgres)", s)
}

// Config selects and locates the database.
type Config struct {
	Engine  Engine
	DataDir string // SQLite: the directory holding store.db
	DSN     string // Postgres: a libpq connection string or postgres:// URL
	// SecretKey seals the secrets the store keeps (package secretbox):
	// the operator's key as text (base64 or hex of 32 bytes); empty: the
	// key file in DataDir, created on first start. The store itself does
	// not use it.
	SecretKey string
	// ForgetLostSecretKey adopts SecretKey (or a new key file) for a store
	// sealed with another key, dropping the secrets sealed with that one.
	ForgetLostSecretKey bool
}

// Store is the management database.
type Store struct {
	eng engine
	// Time spent in transactions and in reads, for the store-latency
	// metrics.
	txs, reads timing
}

type timing struct{ count, nanos atomic.Int64 }

func (t *timing) since(start time.Time) {
	t.count.Add(1)
	t.nanos.Add(int64(time.Since(start)))
}

// Timing reports how many transactions and reads ran and how long they
// took in all.
func (s *Store) Timing() (txs int64, txTime time.Duration, reads int64, readTime time.Duration) {
	return s.txs.count.Load(), time.Duration(s.txs.nanos.Load()), s.reads.count.Load(), time.Duration(s.reads.nanos.Load())
}

// Open connects to the configured engine and applies pending migrations.
func Open(ctx context.Context, c Config) (*Store, error) {
	s, err := OpenNoMigrate(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// OpenNoMigrate connects without touching the schema (for `migrate` and
// tests of upgrades).
func OpenNoMigrate(ctx context.Context, c Config) (*Store, error) {
	var (
		eng engine
		err error
	)
	switch c.Engine {
	case SQLite, "":
		if c.DataDir == "" {
			return nil, errors.New("sqlite store: no data directory given")
		}
		eng, err = openSQLite(ctx, c.DataDir)
	case Postgres:
		if c.DSN == "" {
			return nil, errors.New("postgres store: no DSN given (--store-dsn or NB_STORE_ENGINE_POSTGRES_DSN)")
		}
		eng, err = openPostgres(ctx, c.DSN)
	default:
		return nil, fmt.Errorf("unknown store engine %q (want sqlite or postgres)", c.Engine)
	}
	if err != nil {
		return nil, err
	}
	return &Store{eng: eng}, nil
}

// Engine reports which engine the store runs on.
func (s *Store) Engine() Engine { return s.eng.name() }

// Close releases the database.
func (s *Store) Close() error { return s.eng.close() }

// Tx is a transaction (or, from Read, a series of autocommitted reads).
type Tx struct {
	q   querier
	eng engine
}

// Tx runs fn in a transaction, committing when fn returns nil. Everything fn
// changes commits together or not at all.
func (s *Store) Tx(ctx context.Context, fn func(tx *Tx) error) error {
	defer s.txs.since(time.Now())
	t, err := s.eng.begin(ctx)
	if err != nil {
		return fmt.Errorf("begin: %w", mapErr(err))
	}
	if err := fn(&Tx{q: t, eng: s.eng}); err != nil {
		_ = t.rollback(context.WithoutCancel(ctx))
		return err
	}
	if err := t.commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", mapErr(err))
	}
	return nil
}

// Read runs fn outside a transaction (each query sees committed state).
func (s *Store) Read(ctx context.Context, fn func(tx *Tx) error) error {
	defer s.reads.since(time.Now())
	return fn(&Tx{q: s.eng.pool(), eng: s.eng})
}

func nanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}
