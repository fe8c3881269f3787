package store_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// statePeers creates an account with three peers, created newest first
// with IDs ascending (so the order is the creation time's, not the ID's)
// and each last seen at its own time, and another account with one peer.
func statePeers(t *testing.T, st *store.Store) account.Account {
	t.Helper()
	acc := mkAccount(t, st, "acc-states", "100.64.0.0/16")
	other := mkAccount(t, st, "acc-other", "100.65.0.0/16")
	for i := 1; i <= 3; i++ {
		p := mkPeer(t, acc, i)
		p.CreatedAt = p.CreatedAt.Add(-time.Duration(i) * time.Hour)
		p.LastSeen = time.Unix(1_700_000_000+int64(i), 0).UTC()
		for range i {
			p.IP = p.IP.Next()
		}
		insertPeer(t, st, p)
	}
	insertPeer(t, st, mkPeer(t, other, 1))
	return acc
}

// TestEachPeerState: the streamed read of connection states reads the
// account's peers only, in the order Peers lists them, and stops at the
// callback's first error and returns it. Both engines.
func TestEachPeerState(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		acc := statePeers(t, st)
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

// TestEachPeerStateAt: at the account's view revision the ID-less read
// gives every peer's state by its position in Peers' order; at any other
// revision (one a peer's insert or delete has moved on from) it reads
// nothing, and it stops at the callback's first error. Both engines.
func TestEachPeerStateAt(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		acc := statePeers(t, st)
		type state struct {
			i         int
			connected bool
			seen      time.Time
		}
		// read returns the view revision and, read at rev+delta, the
		// states and the count EachPeerStateAt gave.
		read := func(delta int) (uint64, []state, int, []store.PeerState) {
			t.Helper()
			var (
				rev  uint64
				got  []state
				n    int
				want []store.PeerState
			)
			if err := st.Read(ctx, func(tx *store.Tx) error {
				at := tx.In(acc.ID)
				_, r, err := at.ViewRevision(ctx)
				if err != nil {
					return err
				}
				rev = r
				if n, err = at.EachPeerStateAt(ctx, uint64(int64(r)+int64(delta)), func(i int, c bool, seen time.Time) error {
					got = append(got, state{i, c, seen})
					return nil
				}); err != nil {
					return err
				}
				want, err = at.PeerStates(ctx)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return rev, got, n, want
		}
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			return tx.In(acc.ID).SetPeerConnected(ctx, mkPeer(t, acc, 2).ID, true, time.Unix(1_700_000_100, 0).UnixNano(), "instance")
		}); err != nil {
			t.Fatal(err)
		}
		rev, got, n, want := read(0)
		if n != 3 || len(got) != 3 || len(want) != 3 {
			t.Fatalf("at the current revision read %d states %+v, want the 3 of %+v", n, got, want)
		}
		for i, w := range want {
			if g := got[i]; g.i != i || g.connected != w.Connected || !g.seen.Equal(w.LastSeen) {
				t.Errorf("state %d = %+v, want %+v (Peers' order)", i, g, w)
			}
		}
		if !got[1].connected || got[0].connected {
			t.Errorf("states %+v: want only the second (peer 2, created between the others) connected", got)
		}
		for _, d := range []int{-1, 1} {
			if _, got, n, _ := read(d); n != 0 || len(got) != 0 {
				t.Errorf("at revision %d+%d read %d states %+v, want none", rev, d, n, got)
			}
		}
		// A peer added: the revision read before it reads nothing now.
		insertPeer(t, st, mkPeer(t, acc, 4))
		if now, _, _, _ := read(0); now == rev {
			t.Fatalf("inserting a peer left the view revision at %d", rev)
		}
		var stale int
		if err := st.Read(ctx, func(tx *store.Tx) error {
			var err error
			stale, err = tx.In(acc.ID).EachPeerStateAt(ctx, rev, func(int, bool, time.Time) error { return nil })
			return err
		}); err != nil || stale != 0 {
			t.Errorf("at the revision before the insert read %d states (err %v), want none", stale, err)
		}
		stop := errors.New("stop")
		if err := st.Read(ctx, func(tx *store.Tx) error {
			_, r, err := tx.In(acc.ID).ViewRevision(ctx)
			if err != nil {
				return err
			}
			_, err = tx.In(acc.ID).EachPeerStateAt(ctx, r, func(i int, _ bool, _ time.Time) error {
				if i == 1 {
					return stop
				}
				return nil
			})
			return err
		}); !errors.Is(err, stop) {
			t.Errorf("EachPeerStateAt = %v, want the callback's error", err)
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
	// The ID-less read: the same search, and the revision looked up once
	// by the accounts' primary key (a scalar subquery, not per row).
	plan, err = store.PeerStatesAtPlanForTest(ctx, st, string(acc.ID))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(plan, func(s string) bool { return strings.Contains(s, "COVERING INDEX peers_state") }) ||
		slices.ContainsFunc(plan, func(s string) bool { return strings.Contains(s, "TEMP B-TREE") || strings.HasPrefix(s, "SCAN") }) {
		t.Errorf("plan of the ID-less peer states read = %q, want a search of the covering index peers_state, no sort and no scan", plan)
	}
}
