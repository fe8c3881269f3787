package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// engine is what a database implementation provides to the store.
type engine interface {
	name() Engine
	pool() querier
	begin(ctx context.Context) (txn, error)
	// forUpdate is the suffix that makes a SELECT hold its rows until the
	// transaction ends ("" where transactions already exclude each other).
	forUpdate() string
	// migrationLockSQL serializes migrations between processes.
	migrationLockSQL() string
	close() error
}

// querier runs statements; both pools and transactions provide it.
type querier interface {
	exec(ctx context.Context, query string, args ...any) (int64, error)
	queryRow(ctx context.Context, query string, args ...any) scanner
	query(ctx context.Context, query string, args ...any) (rows, error)
}

type txn interface {
	querier
	commit(ctx context.Context) error
	rollback(ctx context.Context) error
}

type scanner interface{ Scan(...any) error }

type rows interface {
	Next() bool
	Scan(...any) error
	Err() error
	Close()
}

// FileName is the SQLite database inside a data directory.
const FileName = "store.db"

type sqliteEngine struct{ db *sql.DB }

func openSQLite(ctx context.Context, dir string) (*sqliteEngine, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	// Immediate transactions take the write lock up front, so two writers
	// queue on busy_timeout instead of failing on a lock upgrade; WAL with
	// synchronous=FULL makes every acknowledged commit durable.
	dsn := "file:" + path + "?_txlock=immediate&_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=foreign_keys(1)&_pragma=synchronous(FULL)"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", path, err)
	}
	// Switching a new database to WAL takes an exclusive lock, and SQLite
	// answers a concurrent opener BUSY at once rather than waiting: retry.
	for attempt := 0; ; attempt++ {
		err = db.PingContext(ctx)
		if err == nil {
			break
		}
		if !strings.Contains(err.Error(), "SQLITE_BUSY") || attempt >= 50 {
			db.Close()
			return nil, fmt.Errorf("open %s: %w", path, err)
		}
		time.Sleep(time.Duration(10+attempt*10) * time.Millisecond)
	}
	_ = os.Chmod(path, 0o600)
	// Keep connections open: each new one runs the pragmas and parses the
	// schema again, which under many concurrent readers (a reconnect
	// storm) cost more than the queries (database/sql keeps only 2 idle).
	db.SetMaxIdleConns(32)
	return &sqliteEngine{db: db}, nil
}

func (e *sqliteEngine) name() Engine  { return SQLite }
func (e *sqliteEngine) pool() querier { return sqlQuerier{e.db} }
func (e *sqliteEngine) close() error  { return e.db.Close() }

// SQLite's immediate transactions already hold the database write lock.
func (e *sqliteEngine) forUpdate() string        { return "" }
func (e *sqliteEngine) migrationLockSQL() string { return "" }

func (e *sqliteEngine) begin(ctx context.Context) (txn, error) {
	t, err := e.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, err
	}
	return sqlTxn{sqlQuerier{t}, t}, nil
}

// sqlConn is what *sql.DB and *sql.Tx share.
type sqlConn interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

type sqlQuerier struct{ c sqlConn }

func (q sqlQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	res, err := q.c.ExecContext(ctx, query, args...)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (q sqlQuerier) queryRow(ctx context.Context, query string, args ...any) scanner {
	return q.c.QueryRowContext(ctx, query, args...)
}

func (q sqlQuerier) query(ctx context.Context, query string, args ...any) (rows, error) {
	r, err := q.c.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	return sqlRows{r}, nil
}

type sqlRows struct{ *sql.Rows }

func (r sqlRows) Close() { _ = r.Rows.Close() }

type sqlTxn struct {
	sqlQuerier
	t *sql.Tx
}

func (t sqlTxn) commit(context.Context) error   { return t.t.Commit() }
func (t sqlTxn) rollback(context.Context) error { return t.t.Rollback() }

// queryAll runs a query and scans every row with scan.
func queryAll[T any](ctx context.Context, q querier, scan func(scanner) (T, error), query string, args ...any) ([]T, error) {
	rs, err := q.query(ctx, query, args...)
	if err != nil {
		return nil, mapErr(err)
	}
	defer rs.Close()
	var out []T
	for rs.Next() {
		v, err := scan(rs)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, mapErr(rs.Err())
}

// isUnique reports whether err is a unique-constraint violation.
func isUnique(err error) bool {
	var pe interface{ SQLState() string }
	if errors.As(err, &pe) {
		return pe.SQLState() == "23505"
	}
	return strings.Contains(err.Error(), "UNIQUE constraint") || strings.Contains(err.Error(), "PRIMARY KEY constraint")
}

// mapErr turns engine errors into the store's: absent rows, unique
// conflicts, and lost connections.
func mapErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sql.ErrNoRows), isNoRows(err):
		return ErrNotFound
	case isUnique(err), isTxConflict(err):
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case isConnErr(err):
		return fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	return err
}

// Backup writes a consistent copy of a SQLite store to path while the store
// stays in use (VACUUM INTO runs inside one read transaction).
func (s *Store) Backup(ctx context.Context, path string) error {
	e, ok := s.eng.(*sqliteEngine)
	if !ok {
		return fmt.Errorf("backup copies the sqlite store; for %s use its own tools (pg_dump -Fc DBNAME > FILE)", s.eng.name())
	}
	if _, err := os.Stat(path); err == nil {
		return fmt.Errorf("backup: %s exists; choose a new file", path)
	}
	if _, err := e.db.ExecContext(ctx, `VACUUM INTO ?`, path); err != nil {
		return fmt.Errorf("backup to %s: %w", path, err)
	}
	return os.Chmod(path, 0o600)
}
