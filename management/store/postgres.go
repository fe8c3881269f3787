package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// migrationLockKey is the advisory lock that serializes schema migrations
// between management processes starting at once ("wiremesh" in ASCII).
const migrationLockKey = 0x776972656d657368

type pgEngine struct{ p *pgxpool.Pool }

func openPostgres(ctx context.Context, dsn string) (*pgEngine, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres store: bad DSN: %w", err)
	}
	cfg.MaxConns = max(cfg.MaxConns, 8)
	// Notice a dead server within seconds rather than on the next query.
	cfg.HealthCheckPeriod = 5 * time.Second
	p, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres store: %w", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := p.Ping(pctx); err != nil {
		p.Close()
		return nil, fmt.Errorf("postgres store: connect to %s:%d: %w", cfg.ConnConfig.Host, cfg.ConnConfig.Port, err)
	}
	return &pgEngine{p: p}, nil
}

func (e *pgEngine) name() Engine  { return Postgres }
func (e *pgEngine) pool() querier { return pgQuerier{e.p} }
func (e *pgEngine) close() error  { e.p.Close(); return nil }

// NO KEY UPDATE excludes other writers of the row but not the key-share
// locks that foreign-key checks take (inserting a peer locks its account
// that way): FOR UPDATE would deadlock against concurrent registrations.
func (e *pgEngine) forUpdate() string { return " FOR NO KEY UPDATE" }

func (e *pgEngine) migrationLockSQL() string {
	return `SELECT pg_advisory_xact_lock(` + strconv.FormatInt(migrationLockKey, 10) + `)`
}

func (e *pgEngine) begin(ctx context.Context) (txn, error) {
	t, err := e.p.Begin(ctx)
	if err != nil {
		return nil, err
	}
	return pgTxn{pgQuerier{t}, t}, nil
}

// pgConn is what pgxpool.Pool and pgx.Tx share.
type pgConn interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

type pgQuerier struct{ c pgConn }

func (q pgQuerier) exec(ctx context.Context, query string, args ...any) (int64, error) {
	tag, err := q.c.Exec(ctx, rebind(query), args...)
	if err != nil {
		return 0, err
	}
	return tag.RowsAffected(), nil
}

func (q pgQuerier) queryRow(ctx context.Context, query string, args ...any) scanner {
	return q.c.QueryRow(ctx, rebind(query), args...)
}

func (q pgQuerier) query(ctx context.Context, query string, args ...any) (rows, error) {
	return q.c.Query(ctx, rebind(query), args...)
}

type pgTxn struct {
	pgQuerier
	t pgx.Tx
}

func (t pgTxn) commit(ctx context.Context) error   { return t.t.Commit(ctx) }
func (t pgTxn) rollback(ctx context.Context) error { return t.t.Rollback(ctx) }

// rebind numbers ? placeholders as Postgres wants them ($1, $2, ...). The
// store's statements never contain a literal question mark.
func rebind(q string) string {
	n := strings.Count(q, "?")
	if n == 0 {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 2*n)
	i := 0
	for _, part := range strings.SplitAfter(q, "?") {
		if strings.HasSuffix(part, "?") {
			i++
			b.WriteString(part[:len(part)-1])
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(i))
			continue
		}
		b.WriteString(part)
	}
	return b.String()
}

func isNoRows(err error) bool { return errors.Is(err, pgx.ErrNoRows) }

// isTxConflict reports a transaction Postgres aborted to resolve a
// conflict with another (deadlock, serialization failure): retrying it
// from the start is safe.
func isTxConflict(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

// isConnErr reports errors that mean the database cannot be reached now
// (as opposed to a bad statement): callers may retry later.
func isConnErr(err error) bool {
	var ce *pgconn.ConnectError
	var ne net.Error
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return true
	case errors.As(err, &pe):
		// admin_shutdown, crash_shutdown, cannot_connect_now
		return pe.Code == "57P01" || pe.Code == "57P02" || pe.Code == "57P03"
	}
	return pgconn.SafeToRetry(err)
}
