package peers_test

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/tenant"
)

type stateLog struct {
	mu   sync.Mutex
	seen []account.PeerID
}

func (l *stateLog) MembershipChanged(account.ID) {}

func (l *stateLog) PeerChanged(_ account.ID, id account.PeerID, _ account.UserID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, id)
}

func (l *stateLog) take() []account.PeerID {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := l.seen
	l.seen = nil
	return out
}

// TestStatesNotified: each recorded connected-state change (a stream
// opening or closing, a batch marked online) is told to States after it
// is stored; none goes to the network-change notifier.
func TestStatesNotified(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		acc, err := tenant.Default(ctx, st, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		k, secret, _ := setupkey.New(acc.ID, setupkey.Options{Name: "k", Reusable: true}, time.Now())
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, k) }); err != nil {
			t.Fatal(err)
		}
		n := &countingNotifier{}
		svc := peers.New(st, n, slog.New(slog.DiscardHandler), nil)
		log := &stateLog{}
		svc.States = log
		pk, _ := key.NewPrivate()
		p, _, err := svc.Login(ctx, peers.LoginInput{Key: pk.Public(), SetupKey: secret, Meta: account.Meta{Hostname: "h"}})
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]account.PeerID{p.ID}, log.take()); d != "" {
			t.Errorf("registration told (-want +got):\n%s", d)
		}
		before := n.count()
		if err := svc.SetConnected(ctx, acc.ID, p.ID, true); err != nil {
			t.Fatal(err)
		}
		if err := svc.SetConnected(ctx, acc.ID, p.ID, false); err != nil {
			t.Fatal(err)
		}
		if err := svc.MarkOnline(ctx, map[account.ID][]account.PeerID{acc.ID: {p.ID}}); err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]account.PeerID{p.ID, p.ID, p.ID}, log.take()); d != "" {
			t.Errorf("states told (-want +got):\n%s", d)
		}
		if got := n.count(); got != before {
			t.Errorf("network notifier told %d times of connected states, want 0", got-before)
		}
	})
}

type countingNotifier struct {
	mu sync.Mutex
	n  int
}

func (c *countingNotifier) AccountChanged(account.ID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
}

func (c *countingNotifier) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}
