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
	rs, err := s.eng.pool().query(ctx, `EXPLAIN QUERY PLAN `+peerStatesSQL, acc)
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
