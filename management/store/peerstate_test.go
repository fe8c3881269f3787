package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestEachPeerState: the streamed read of connection states reads the
// account's peers only, in the order Peers lists them, and stops at the
// callback's first error and returns it. Both engines.
func TestEachPeerState(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		acc := mkAccount(t, st, "acc-states", "100.64.0.0/16")
		other := mkAccount(t, st, "acc-other", "100.65.0.0/16")
		for i := 1; i <= 3; i++ {
			// Created newest first, IDs ascending: the order is the
			// creation time's, not the ID's.
			p := mkPeer(t, acc, i)
			p.CreatedAt = p.CreatedAt.Add(-time.Duration(i) * time.Hour)
			for range i {
				p.IP = p.IP.Next()
			}
			insertPeer(t, st, p)
		}
		insertPeer(t, st, mkPeer(t, other, 1))
		stop := errors.New("stop")
		var seen []string
		err := st.Read(ctx, func(tx *store.Tx) error {
			if err := tx.In(acc.ID).EachPeerState(ctx, func(s store.PeerState) error {
				seen = append(seen, string(s.ID))
				return nil
			}); err != nil {
				return err
			}
			n := 0
			return tx.In(acc.ID).EachPeerState(ctx, func(store.PeerState) error {
				if n++; n == 2 {
					return stop
				}
				return nil
			})
		})
		if !errors.Is(err, stop) {
			t.Errorf("EachPeerState = %v, want the callback's error", err)
		}
		var want []string
		if err := st.Read(ctx, func(tx *store.Tx) error {
			all, err := tx.In(acc.ID).Peers(ctx)
			for _, p := range all {
				want = append(want, string(p.ID))
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(want) != 3 || !slices.Equal(seen, want) {
			t.Errorf("EachPeerState read %v, want %v (Peers' order)", seen, want)
		}
	})
}

// TestPeerStatesCovered: on SQLite the connection-state read uses the
// peers_state index alone, in its order (no sort), without looking up
// each (wide) peer row: the cached REST peer list makes this read on
// every request.
func TestPeerStatesCovered(t *testing.T) {
	st := storetest.Engine{Name: store.SQLite, Config: func(t testing.TB) store.Config {
		return store.Config{Engine: store.SQLite, DataDir: t.TempDir()}
	}}.Open(t)
	acc := mkAccount(t, st, "acc-plan", "100.64.0.0/16")
	plan, err := store.PeerStatesPlanForTest(ctx, st, string(acc.ID))
	if err != nil {
		t.Fatal(err)
	}
	if len(plan) != 1 || !strings.Contains(plan[0], "COVERING INDEX peers_state") {
		t.Errorf("plan of the peer states read = %q, want one search of the covering index peers_state", plan)
	}
}
