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

// PeerStatesPlanForTest is SQLite's query plan of EachPeerState's read,
// one detail line per step.
func PeerStatesPlanForTest(ctx context.Context, s *Store, acc string) ([]string, error) {
	return sqlitePlan(ctx, s, peerStatesSQL, acc)
}

// PeerStatesAtPlanForTest is SQLite's query plan of EachPeerStateAt's
// read.
func PeerStatesAtPlanForTest(ctx context.Context, s *Store, acc string) ([]string, error) {
	return sqlitePlan(ctx, s, peerStatesAtSQL, acc, acc, int64(1))
}

func sqlitePlan(ctx context.Context, s *Store, query string, args ...any) ([]string, error) {
	rs, err := s.eng.pool().query(ctx, `EXPLAIN QUERY PLAN `+query, args...)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	var out []string
	for rs.Next() {
		var (
			id, parent, unused int
			detail             string
		)
		if err := rs.Scan(&id, &parent, &unused, &detail); err != nil {
			return nil, err
		}
		out = append(out, detail)
	}
	return out, rs.Err()
}
