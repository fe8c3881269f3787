package store

import (
	"context"

	"github.com/wiremesh/wiremesh/management/account"
)

// PeerName is what a group or policy shows of a peer: no metadata, no
// keys, so reading thousands of them costs a narrow scan.
type PeerName struct {
	ID     account.PeerID
	Name   string
	UserID account.UserID
}

// PeerNames lists the account's peers by ID, name and user, oldest first
// (the order of Peers).
func (a *AccountTx) PeerNames(ctx context.Context) ([]PeerName, error) {
	return queryAll(ctx, a.q(), func(sc scanner) (PeerName, error) {
		var id, name, user string
		if err := sc.Scan(&id, &name, &user); err != nil {
			return PeerName{}, mapErr(err)
		}
		return PeerName{ID: account.PeerID(id), Name: name, UserID: account.UserID(user)}, nil
	}, `SELECT id, name, user_id FROM peers WHERE account_id = ? ORDER BY created_at, id`, string(a.id))
}

// PeersByID reads the account's peers with the given IDs (those that
// exist), in no particular order.
func (a *AccountTx) PeersByID(ctx context.Context, ids []account.PeerID) ([]account.Peer, error) {
	const chunk = 500
	var out []account.Peer
	for len(ids) > 0 {
		n := min(chunk, len(ids))
		args := make([]any, 0, n+1)
		args = append(args, string(a.id))
		marks := make([]byte, 0, 2*n)
		for i, id := range ids[:n] {
			if i > 0 {
				marks = append(marks, ',')
			}
			marks = append(marks, '?')
			args = append(args, string(id))
		}
		ps, err := queryAll(ctx, a.q(), scanPeer, `SELECT `+peerCols+` FROM peers WHERE account_id = ? AND id IN (`+string(marks)+`)`, args...)
		if err != nil {
			return nil, err
		}
		out = append(out, ps...)
		ids = ids[n:]
	}
	return out, nil
}
