package peers

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

// Connected-state writes are group-committed: when many streams open or
// close at once (a server restart, a reconnect storm), the writes that
// arrive while one transaction commits go together in the next one, so
// they cost one commit (one fsync on SQLite) instead of one each. Callers
// still wait for their own write and get its error.

type connUpdate struct {
	acc       account.ID
	id        account.PeerID
	connected bool
	at        int64
}

type connBatch struct {
	items []connUpdate
	done  chan struct{}
	err   error
}

type groupCommit struct {
	mu      sync.Mutex
	next    *connBatch // collecting; its first caller leads it
	writing sync.Mutex // one batch commits at a time
}

func (g *groupCommit) do(u connUpdate, write func([]connUpdate) error) error {
	g.mu.Lock()
	b := g.next
	lead := b == nil
	if lead {
		b = &connBatch{done: make(chan struct{})}
		g.next = b
	}
	b.items = append(b.items, u)
	g.mu.Unlock()
	if !lead {
		<-b.done
		return b.err
	}
	// While the previous batch commits, this one keeps collecting.
	g.writing.Lock()
	g.mu.Lock()
	g.next = nil
	items := b.items
	g.mu.Unlock()
	b.err = write(items)
	g.writing.Unlock()
	close(b.done)
	return b.err
}

// SetConnected records whether a peer's Sync stream is open on this
// instance. It is not a network change (maps list peers whether or not
// they are online).
func (s *Service) SetConnected(ctx context.Context, acc account.ID, id account.PeerID, connected bool) error {
	u := connUpdate{acc: acc, id: id, connected: connected, at: s.now().UnixNano()}
	err := s.conn.do(u, func(items []connUpdate) error {
		// The batch is shared: it must not fail because one caller left.
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		return s.writeConnected(wctx, items)
	})
	if err == nil && s.States != nil {
		s.States.PeerChanged(acc, id, "")
	}
	return err
}

// MarkOnline records, in one transaction, that the given peers (by
// account) have their streams open on this instance.
func (s *Service) MarkOnline(ctx context.Context, peers map[account.ID][]account.PeerID) error {
	at := s.now().UnixNano()
	var items []connUpdate
	for acc, ids := range peers {
		for _, id := range ids {
			items = append(items, connUpdate{acc: acc, id: id, connected: true, at: at})
		}
	}
	if err := s.writeConnected(ctx, items); err != nil {
		return err
	}
	if s.States != nil {
		for _, it := range items {
			s.States.PeerChanged(it.acc, it.id, "")
		}
	}
	return nil
}

func (s *Service) writeConnected(ctx context.Context, items []connUpdate) error {
	return s.store.Tx(ctx, func(tx *store.Tx) error {
		for _, it := range items {
			// A peer deleted meanwhile has nothing to record.
			if err := tx.In(it.acc).SetPeerConnected(ctx, it.id, it.connected, it.at, s.Instance); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		return nil
	})
}
