package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// streamRig is an account of n peers on a real SQLite store, with the
// peer list encoded as a cache hit serves it.
type streamRig struct {
	st  *store.Store
	api *API
	acc account.Account
	l   *peerList
}

func newStreamRig(t testing.TB, n int) streamRig {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Engine: store.SQLite, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	acc, err := tenant.Default(ctx, st, base)
	if err != nil {
		t.Fatal(err)
	}
	var (
		v   peerView
		rev uint64
	)
	err = st.Tx(ctx, func(tx *store.Tx) error {
		ip := acc.Network.Masked().Addr()
		for i := range n {
			k, err := key.NewPrivate()
			if err != nil {
				return err
			}
			ip = ip.Next()
			// Created newest first: the list's order is not the IDs'.
			p := account.Peer{ID: account.PeerID(fmt.Sprintf("peer-%03d", i)), AccountID: acc.ID, Key: k.Public(), IP: ip,
				Name: fmt.Sprintf("host-%d", i), DNSLabel: fmt.Sprintf("host-%d", i), CreatedAt: base.Add(-time.Duration(i) * time.Minute), LastSeen: base}
			if err := tx.In(acc.ID).InsertPeer(ctx, p); err != nil {
				return err
			}
		}
		// The revision first, as listAllPeers reads it.
		if _, rev, err = tx.In(acc.ID).ViewRevision(ctx); err != nil {
			return err
		}
		v.peers, err = tx.In(acc.ID).Peers(ctx)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	v.acc = acc
	for _, p := range v.peers {
		v.ids = append(v.ids, p.ID)
	}
	v.index()
	return streamRig{st: st, api: New(Options{Store: st}), acc: acc, l: encodePeerList(v, rev, base)}
}

// TestPeerStatesRead: states streamed in the list's order are placed and
// published; a list in another order is refused when streamed (a place
// may have been written) and placed in full when read first.
func TestPeerStatesRead(t *testing.T) {
	rig := newStreamRig(t, 150)
	ctx := context.Background()
	ps := newPeerStates(len(rig.l.peers))
	in, err := ps.read(ctx, rig.st, rig.acc.ID, rig.l, true)
	if err != nil || in != len(rig.l.peers) || !allTrue(ps.live) {
		t.Fatalf("streamed read: %d final, err %v, live %v; want all", in, err, ps.live)
	}
	if got := ps.in.Load(); got != 128 {
		t.Errorf("published %d final, want 128 (every 64)", got)
	}
	for i, s := range ps.states {
		if s.ID != rig.l.peers[i].p.ID {
			t.Fatalf("state %d is %s's, want %s's", i, s.ID, rig.l.peers[i].p.ID)
		}
	}

	// The same peers listed in reverse.
	rev := &peerList{peers: slices.Clone(rig.l.peers), index: map[account.PeerID]int{}}
	slices.Reverse(rev.peers)
	for i, lp := range rev.peers {
		rev.index[lp.p.ID] = i
	}
	ps = newPeerStates(len(rev.peers))
	ps.publish(1) // the writer may have written the first place
	if _, err := ps.read(ctx, rig.st, rig.acc.ID, rev, true); !errors.Is(err, errStatesDisordered) {
		t.Errorf("streamed read out of order: %v, want %v", err, errStatesDisordered)
	}
	ps = newPeerStates(len(rev.peers))
	if in, err := ps.read(ctx, rig.st, rig.acc.ID, rev, false); err != nil || in != len(rev.peers) || !allTrue(ps.live) {
		t.Errorf("read first, out of order: %d final, err %v; want all placed", in, err)
	}

	// A list encoded at an older revision (the states are read by ID,
	// and a peer added since is not the list's) and one at the current
	// revision that does not hold the account's peers (never expected:
	// positions cannot be trusted, so refused).
	old := &peerList{rev: rig.l.rev - 1, peers: rig.l.peers, index: rig.l.index}
	ps = newPeerStates(len(old.peers))
	if in, err := ps.read(ctx, rig.st, rig.acc.ID, old, true); err != nil || in != len(old.peers) || !allTrue(ps.live) || ps.states[7].ID != old.peers[7].p.ID {
		t.Errorf("streamed read at an older revision: %d final, err %v; want all placed by ID", in, err)
	}
	short := &peerList{rev: rig.l.rev, peers: rig.l.peers[:100], index: map[account.PeerID]int{}}
	for i, lp := range short.peers {
		short.index[lp.p.ID] = i
	}
	ps = newPeerStates(len(short.peers))
	if _, err := ps.read(ctx, rig.st, rig.acc.ID, short, true); !errors.Is(err, errStatesDisordered) {
		t.Errorf("streamed read at the revision of a list missing peers: %v, want %v", err, errStatesDisordered)
	}
}

func allTrue(bs []bool) bool { return !slices.Contains(bs, false) }

// TestListWriterWaits: the writer writes no peer before its state is
// final, and a read that fails before the first chunk leaves the answer
// unsent (its error gets its own answer); a finished read gives the
// same answer as states known up front.
func TestListWriterWaits(t *testing.T) {
	rig := newStreamRig(t, 3)
	states := func() *peerStates {
		ps := newPeerStates(3)
		for i, lp := range rig.l.peers {
			ps.states[i], ps.live[i] = store.PeerState{ID: lp.p.ID, Connected: i == 1, LastSeen: lp.p.LastSeen}, true
		}
		return ps
	}
	counts := make([]int32, 3)
	want := httptest.NewRecorder()
	full := states()
	full.done(3, nil)
	if err := (&listWriter{w: want, l: rig.l, counts: counts, now: time.Now()}).write(full); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(want.Body.String(), `"connected":true`) || strings.Count(want.Body.String(), `"id":`) != 3 {
		t.Fatalf("answer %s: want the three peers, one connected", want.Body)
	}

	// Streamed: the writer waits for each position.
	ps := states()
	got := httptest.NewRecorder()
	wrote := make(chan error, 1)
	go func() { wrote <- (&listWriter{w: got, l: rig.l, counts: counts, now: time.Now()}).write(ps) }()
	ps.publish(1)
	select {
	case err := <-wrote:
		t.Fatalf("the writer finished (%v) with two states not read", err)
	case <-time.After(50 * time.Millisecond):
	}
	ps.done(3, nil)
	if err := <-wrote; err != nil || got.Body.String() != want.Body.String() {
		t.Fatalf("streamed answer %q (err %v), want %q", got.Body, err, want.Body)
	}

	// The read fails after the first peer: nothing is sent.
	ps = states()
	failed := errors.New("read failed")
	ps.done(1, failed)
	rec := httptest.NewRecorder()
	lw := &listWriter{w: rec, l: rig.l, counts: counts, now: time.Now()}
	if err := lw.write(ps); !errors.Is(err, failed) || lw.sent || rec.Body.Len() != 0 {
		t.Fatalf("failed read: err %v, sent %v, body %q; want the error and nothing sent", err, lw.sent, rec.Body)
	}
}

// TestListAllPeersStreamed: the cached answer (its states streamed by a
// goroutine) is the uncached one, and no goroutine is left after it,
// whether the request completes or its client has gone.
func TestListAllPeersStreamed(t *testing.T) {
	rig := newStreamRig(t, 300)
	base := runtime.NumGoroutine()
	call := func(ctx context.Context) (*httptest.ResponseRecorder, error) {
		rec := httptest.NewRecorder()
		r := httptest.NewRequestWithContext(ctx, http.MethodGet, "/api/peers", nil)
		return rec, rig.api.listAllPeers(rec, r, rig.acc.ID)
	}
	miss, err := call(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := rig.st.Tx(context.Background(), func(tx *store.Tx) error {
		return tx.In(rig.acc.ID).SetPeerConnected(context.Background(), "peer-007", true, time.Now().UnixNano(), "instance")
	}); err != nil {
		t.Fatal(err)
	}
	hit, err := call(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(hit.Body.String(), `"id":"peer-`) != 300 || strings.Count(hit.Body.String(), `"connected":true`) != 1 ||
		strings.Count(miss.Body.String(), `"connected":true`) != 0 {
		t.Fatalf("the cached answer does not show the one connection:\nmiss %.300s\nhit %.300s", miss.Body, hit.Body)
	}
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := call(gone); !errors.Is(err, context.Canceled) {
		t.Errorf("a request whose client has gone: %v, want %v", err, context.Canceled)
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<16)
			t.Fatalf("%d goroutines left (%d before):\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(10 * time.Millisecond)
	}
}
