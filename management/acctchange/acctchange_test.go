package acctchange

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

type notifier struct {
	mu   sync.Mutex
	seen []account.ID
}

func (n *notifier) AccountChanged(id account.ID) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen = append(n.seen, id)
}

func (n *notifier) got() []account.ID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]account.ID(nil), n.seen...)
}

// failingCommit runs the change in a real transaction, then fails as a
// commit would: the transaction is rolled back after fn succeeded.
type failingCommit struct {
	st  *store.Store
	err error
}

func (f failingCommit) Tx(ctx context.Context, fn func(tx *store.Tx) error) error {
	return f.st.Tx(ctx, func(tx *store.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		return f.err
	})
}

const acc account.ID = "acc"

// state is what a change may have written: the serial, the events (oldest
// first) and whether group g exists.
type state struct {
	Serial uint64
	Events []account.Event
	Group  bool
}

func read(t *testing.T, st *store.Store) state {
	t.Helper()
	var s state
	err := st.Read(context.Background(), func(tx *store.Tx) error {
		at := tx.In(acc)
		var err error
		if s.Serial, _, err = at.ViewRevision(context.Background()); err != nil {
			return err
		}
		evs, err := at.Events(context.Background(), 0)
		if err != nil {
			return err
		}
		for i := len(evs) - 1; i >= 0; i-- {
			e := evs[i]
			e.ID, e.AccountID = 0, ""
			e.At = e.At.UTC()
			s.Events = append(s.Events, e)
		}
		_, err = at.Group(context.Background(), "g")
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		s.Group = err == nil
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func putGroup(ctx context.Context, at *store.AccountTx) error {
	return at.PutGroup(ctx, account.Group{ID: "g", AccountID: acc, Name: "g", Peers: []account.PeerID{}})
}

// TestRun: on both engines, a change with events commits its writes, bumps
// the serial once, logs its events in order with the injected clock and
// notifies once; a failing change (in fn, or at commit) writes nothing and
// notifies nobody; a change without events commits its writes only.
func TestRun(t *testing.T) {
	boom := errors.New("boom")
	at0 := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
	evs := []Event{{Activity: "group.add", Target: "g", Meta: map[string]string{"name": "g"}}, {Activity: "policy.update", Target: "p", Meta: map[string]string{}}}
	logged := []account.Event{
		{At: at0, Activity: "group.add", Initiator: "user-1", Target: "g", Meta: map[string]string{"name": "g"}},
		{At: at0, Activity: "policy.update", Initiator: "user-1", Target: "p", Meta: map[string]string{}},
	}
	tests := []struct {
		name       string
		commitErr  error // the transaction fails after fn
		fn         func(ctx context.Context, at *store.AccountTx) ([]Event, error)
		wantErr    error
		want       state
		wantNotify []account.ID
	}{
		{
			name: "commits",
			fn: func(ctx context.Context, at *store.AccountTx) ([]Event, error) {
				return evs, putGroup(ctx, at)
			},
			want:       state{Serial: 1, Events: logged, Group: true},
			wantNotify: []account.ID{acc},
		},
		{
			name: "fn fails",
			fn: func(ctx context.Context, at *store.AccountTx) ([]Event, error) {
				if err := putGroup(ctx, at); err != nil {
					return nil, err
				}
				return evs, boom
			},
			wantErr: boom,
		},
		{
			name:      "commit fails",
			commitErr: boom,
			fn: func(ctx context.Context, at *store.AccountTx) ([]Event, error) {
				return evs, putGroup(ctx, at)
			},
			wantErr: boom,
		},
		{
			name: "no events",
			fn: func(ctx context.Context, at *store.AccountTx) ([]Event, error) {
				return nil, putGroup(ctx, at)
			},
			want: state{Group: true},
		},
	}
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				ctx := context.Background()
				st := open(t, e)
				var tx Transactor = st
				if tt.commitErr != nil {
					tx = failingCommit{st: st, err: tt.commitErr}
				}
				n := &notifier{}
				r := New(tx, n, Options{Now: func() time.Time { return at0.In(time.FixedZone("x", 3600)) }})
				err := r.Run(ctx, acc, "user-1", func(at *store.AccountTx) ([]Event, error) { return tt.fn(ctx, at) })
				if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
					t.Fatalf("Run: got error %v, want %v", err, tt.wantErr)
				}
				if d := cmp.Diff(tt.want, read(t, st)); d != "" {
					t.Errorf("stored state (-want +got):\n%s", d)
				}
				if d := cmp.Diff(tt.wantNotify, n.got()); d != "" {
					t.Errorf("notifications (-want +got):\n%s", d)
				}
			})
		}
	})
}

// TestRunNotifiesOncePerChange: each committed change bumps the serial and
// notifies exactly once, however many events it logs.
func TestRunNotifiesOncePerChange(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := open(t, e)
		n := &notifier{}
		r := New(st, n, Options{})
		for i := range 3 {
			err := r.Run(ctx, acc, "user-1", func(at *store.AccountTx) ([]Event, error) {
				return []Event{{Activity: "a", Target: "1"}, {Activity: "b", Target: "2"}}, nil
			})
			if err != nil {
				t.Fatalf("change %d: %v", i, err)
			}
			if got := len(n.got()); got != i+1 {
				t.Fatalf("after change %d: %d notifications, want %d", i, got, i+1)
			}
		}
		s := read(t, st)
		if s.Serial != 3 || len(s.Events) != 6 {
			t.Errorf("got serial %d and %d events, want 3 and 6", s.Serial, len(s.Events))
		}
	})
}

// TestRunLock: by default the account lock is taken before fn runs, so a
// change to an account that does not exist fails before fn; with NoLock fn
// runs first (package access's order).
func TestRunLock(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := open(t, e)
		for _, noLock := range []bool{false, true} {
			ran := false
			n := &notifier{}
			err := New(st, n, Options{NoLock: noLock}).Run(ctx, "missing", "user-1", func(at *store.AccountTx) ([]Event, error) {
				ran = true
				return nil, nil
			})
			if noLock {
				if err != nil || !ran {
					t.Errorf("NoLock: got error %v, fn ran %v; want no error and fn run", err, ran)
				}
			} else if !errors.Is(err, store.ErrNotFound) || ran {
				t.Errorf("locked: got error %v, fn ran %v; want store.ErrNotFound before fn", err, ran)
			}
			if got := n.got(); len(got) != 0 {
				t.Errorf("noLock=%v: notified %v, want nobody", noLock, got)
			}
		}
	})
}

func open(t *testing.T, e storetest.Engine) *store.Store {
	t.Helper()
	st := e.Open(t)
	a := account.Account{ID: acc, Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.70.0.0/16"), CreatedAt: time.Now().UTC()}
	if err := st.Tx(context.Background(), func(tx *store.Tx) error { return tx.InsertAccount(context.Background(), a) }); err != nil {
		t.Fatal(err)
	}
	return st
}
