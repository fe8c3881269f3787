package routing

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
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

func (n *notifier) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.seen)
}

// TestServiceCommits: on both engines, an accepted change bumps the
// account's serial, logs its event with the injected clock and notifies
// once; a refused one does none of it.
func TestServiceCommits(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		acc := account.Account{ID: "acc", Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.70.0.0/16"), CreatedAt: time.Now().UTC()}
		k, err := key.NewPrivate()
		if err != nil {
			t.Fatal(err)
		}
		peer := account.Peer{ID: "gw", AccountID: acc.ID, Key: k.Public(), IP: netip.MustParseAddr("100.70.0.2"), Name: "gw", DNSLabel: "gw",
			CreatedAt: acc.CreatedAt, LastLogin: acc.CreatedAt, LastSeen: acc.CreatedAt}
		users := account.Group{ID: "users", AccountID: acc.ID, Name: "users", Peers: []account.PeerID{}}
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.InsertAccount(ctx, acc); err != nil {
				return err
			}
			at := tx.In(acc.ID)
			if err := at.InsertPeer(ctx, peer); err != nil {
				return err
			}
			return at.PutGroup(ctx, users)
		}); err != nil {
			t.Fatal(err)
		}
		at0 := time.Date(2026, 12, 5, 1, 2, 3, 0, time.UTC)
		n := &notifier{}
		ids := 0
		s := New(st, n, Options{Now: func() time.Time { return at0 }, NewID: func() string { ids++; return "id-" + string(rune('0'+ids)) }})
		state := func() (serial uint64, events int) {
			t.Helper()
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				if serial, _, err = tx.In(acc.ID).ViewRevision(ctx); err != nil {
					return err
				}
				evs, err := tx.In(acc.ID).Events(ctx, 0)
				events = len(evs)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return serial, events
		}
		s0, e0 := state()
		r := account.Route{NetID: "office", Enabled: true, Peer: peer.ID, Network: netip.MustParsePrefix("10.0.0.0/8"), Metric: 1, Groups: []account.GroupID{users.ID}}
		got, err := s.PutRoute(ctx, acc.ID, r, "admin")
		if err != nil {
			t.Fatal(err)
		}
		if got.ID != "id-1" || got.AccountID != acc.ID {
			t.Errorf("route %+v", got)
		}
		s1, e1 := state()
		if s1 != s0+1 || e1 != e0+1 || n.count() != 1 {
			t.Errorf("accepted change: serial %d -> %d, events %d -> %d, %d notifications; want +1 each", s0, s1, e0, e1, n.count())
		}
		var ev account.Event
		_ = st.Read(ctx, func(tx *store.Tx) error {
			evs, err := tx.In(acc.ID).Events(ctx, 0)
			if len(evs) > 0 {
				ev = evs[0]
			}
			return err
		})
		if ev.Activity != "route.add" || ev.Target != "id-1" || ev.Initiator != "admin" || !ev.At.Equal(at0) || ev.Meta["network_range"] != "10.0.0.0/8" {
			t.Errorf("event %+v", ev)
		}

		// Refused: a duplicate (409), an invalid route (422), a missing
		// network (404).
		if _, err := s.PutRoute(ctx, acc.ID, r, "admin"); !errors.Is(err, ErrConflict) {
			t.Errorf("duplicate route: %v, want ErrConflict", err)
		}
		r.Metric = 0
		if _, err := s.PutRoute(ctx, acc.ID, r, "admin"); !errors.Is(err, ErrInvalid) {
			t.Errorf("metric 0: %v, want ErrInvalid", err)
		}
		if _, err := s.PutResource(ctx, acc.ID, account.NetworkResource{NetworkID: "nope", Name: "x", Address: "10.0.0.1"}, "admin"); !errors.Is(err, ErrNotFound) {
			t.Errorf("resource of a missing network: %v, want ErrNotFound", err)
		}
		if err := s.DeleteRoute(ctx, acc.ID, "nope", "admin"); !errors.Is(err, ErrNotFound) {
			t.Errorf("delete a missing route: %v, want ErrNotFound", err)
		}
		if s2, e2 := state(); s2 != s1 || e2 != e1 || n.count() != 1 {
			t.Errorf("refused changes moved serial %d -> %d, events %d -> %d, notified %d times", s1, s2, e1, e2, n.count())
		}
	})
}

// TestCaps: a description past MaxDescriptionLen and a network past
// MaxNetworks are refused as invalid, and nothing is stored.
func TestCaps(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		acc := account.Account{ID: "acc", Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.70.0.0/16"), CreatedAt: time.Now().UTC()}
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			if err := tx.InsertAccount(ctx, acc); err != nil {
				return err
			}
			at := tx.In(acc.ID)
			for i := 0; i < MaxNetworks-1; i++ {
				id := account.NetworkID(fmt.Sprintf("n%d", i))
				if err := at.PutNetwork(ctx, account.Network{ID: id, AccountID: acc.ID, Name: string(id)}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		s := New(st, &notifier{}, Options{})
		long := strings.Repeat("x", MaxDescriptionLen+1)
		if _, err := s.PutNetwork(ctx, acc.ID, account.Network{Name: "long", Description: long}, "t"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a %d-byte description: %v, want ErrInvalid", len(long), err)
		}
		if _, err := s.PutRoute(ctx, acc.ID, account.Route{NetID: "r", Description: long, Network: netip.MustParsePrefix("10.1.0.0/16"), Metric: 1}, "t"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("a route with a %d-byte description: %v, want ErrInvalid", len(long), err)
		}
		if _, err := s.PutNetwork(ctx, acc.ID, account.Network{Name: "last"}, "t"); err != nil {
			t.Fatalf("network %d of %d: %v", MaxNetworks, MaxNetworks, err)
		}
		if _, err := s.PutNetwork(ctx, acc.ID, account.Network{Name: "one too many"}, "t"); !errors.Is(err, ErrInvalid) {
			t.Fatalf("network %d: %v, want ErrInvalid", MaxNetworks+1, err)
		}
		if err := st.Read(ctx, func(tx *store.Tx) error {
			ns, err := tx.In(acc.ID).Networks(ctx)
			if err == nil && len(ns) != MaxNetworks {
				err = fmt.Errorf("%d networks stored, want %d", len(ns), MaxNetworks)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})
}
