package store

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// Migration is one schema version.
type Migration struct {
	Version int
	Name    string
	sql     string
}

// migrations lists the embedded migrations for an engine, oldest first. A
// file NNNN_name.sql serves both engines; NNNN_name.postgres.sql or
// NNNN_name.sqlite.sql, when present, replaces it for that engine.
func migrations(e Engine) ([]Migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	byVersion := map[int]Migration{}
	specific := map[int]bool{}
	for _, ent := range entries {
		base := strings.TrimSuffix(ent.Name(), ".sql")
		num, rest, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must be NNNN_name.sql", ent.Name())
		}
		name, eng, hasEng := strings.Cut(rest, ".")
		if hasEng && Engine(eng) != e {
			continue
		}
		if !hasEng && specific[v] {
			continue
		}
		b, err := migrationFS.ReadFile("migrations/" + ent.Name())
		if err != nil {
			return nil, err
		}
		if old, dup := byVersion[v]; dup && !hasEng {
			return nil, fmt.Errorf("migrations %q and %q share version %d", old.Name, name, v)
		}
		byVersion[v] = Migration{Version: v, Name: name, sql: string(b)}
		specific[v] = specific[v] || hasEng
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// Migrate applies every embedded migration not yet applied, each in its own
// transaction, and returns those it applied. It is forward-only and safe
// when several processes start at once: on Postgres each migration runs
// under an advisory lock, on SQLite under the database write lock.
func (s *Store) Migrate(ctx context.Context) error {
	_, err := s.migrate(ctx, 0)
	return err
}

// MigrateReport is Migrate that also lists what it applied.
func (s *Store) MigrateReport(ctx context.Context) ([]Migration, error) {
	return s.migrate(ctx, 0)
}

// migrate applies migrations up to and including version upTo (0: all).
func (s *Store) migrate(ctx context.Context, upTo int) ([]Migration, error) {
	ms, err := migrations(s.eng.name())
	if err != nil {
		return nil, err
	}
	var applied []Migration
	for _, m := range ms {
		if upTo > 0 && m.Version > upTo {
			break
		}
		did := false
		err := s.Tx(ctx, func(tx *Tx) error {
			if l := s.eng.migrationLockSQL(); l != "" {
				if _, err := tx.q.exec(ctx, l); err != nil {
					return err
				}
			}
			if _, err := tx.q.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)`); err != nil {
				return err
			}
			var n int
			if err := tx.q.queryRow(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.Version).Scan(&n); err != nil {
				return err
			}
			if n > 0 {
				return nil
			}
			if _, err := tx.q.exec(ctx, m.sql); err != nil {
				return err
			}
			did = true
			_, err := tx.q.exec(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`, m.Version, m.Name, time.Now().UnixNano())
			return err
		})
		if err != nil {
			return applied, fmt.Errorf("migration %04d_%s: %w", m.Version, m.Name, mapErr(err))
		}
		if did {
			applied = append(applied, m)
		}
	}
	if err := s.checkNotNewer(ctx, ms); err != nil {
		return applied, err
	}
	return applied, nil
}

// checkNotNewer refuses a database written by a newer version, whose schema
// this binary does not know.
func (s *Store) checkNotNewer(ctx context.Context, known []Migration) error {
	var v int
	if err := s.eng.pool().queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return fmt.Errorf("schema version: %w", mapErr(err))
	}
	if n := len(known); n > 0 && v > known[n-1].Version {
		return fmt.Errorf("the store has schema version %d but this binary knows only up to %d: upgrade management", v, known[n-1].Version)
	}
	return nil
}

// SchemaVersion is the newest applied migration (0 for an empty database).
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	err := s.eng.pool().queryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_migrations`).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("schema version: %w", mapErr(err))
	}
	return v, nil
}
