package store

import "context"

// MigrateTo applies migrations up to version v only, as an older release
// would have left the store.
func MigrateTo(ctx context.Context, s *Store, v int) error {
	_, err := s.migrate(ctx, v)
	return err
}

// ExecForTest runs a raw statement.
func ExecForTest(ctx context.Context, s *Store, q string) error {
	_, err := s.eng.pool().exec(ctx, q)
	return err
}
