package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// TestCachedEventsMatchRead: the audit events served from the cache,
// before and after more are logged and a user is renamed, are exactly
// what reading and encoding them whole gives.
func TestCachedEventsMatchRead(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Engine: store.SQLite, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	acc, err := tenant.Default(ctx, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	u := account.User{ID: "u1", AccountID: acc.ID, Email: "a&b@example.com", Name: "<Ann>", Role: account.RoleOwner, AutoGroups: []string{}, Issued: "api", CreatedAt: time.Now()}
	log := func(n int) {
		t.Helper()
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			for i := range n {
				meta := map[string]string{"z": "last", "a": "first \u2028 <x>", "name": string(rune('a' + i))}
				if i%3 == 0 {
					meta = nil
				}
				initiator := "u1"
				if i%2 == 1 {
					initiator = "gone"
				}
				if _, err := tx.In(acc.ID).InsertEvent(ctx, account.Event{At: time.Now(), Activity: "peer.setupkey.add", Initiator: initiator, Target: "p\"1", Meta: meta}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertUser(ctx, u) }); err != nil {
		t.Fatal(err)
	}
	a := New(Options{Store: st})
	compare := func(step string) {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, "/api/events", nil)
		cached, read := httptest.NewRecorder(), httptest.NewRecorder()
		if served, err := a.cachedEvents(cached, req, acc.ID); err != nil || !served {
			t.Fatalf("%s: cached events: served %v, %v", step, served, err)
		}
		if err := a.readEvents(read, req, acc.ID); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(read.Body.String(), cached.Body.String()); diff != "" {
			t.Errorf("%s: cached events differ from those read (-read +cached):\n%s", step, diff)
		}
	}
	compare("none")
	log(5)
	compare("five")
	compare("five again")
	log(4)
	if err := st.Tx(ctx, func(tx *store.Tx) error {
		u.Name = "Ann \"B\""
		return tx.In(acc.ID).UpdateUser(ctx, u)
	}); err != nil {
		t.Fatal(err)
	}
	compare("nine, renamed")

	// Requests extending the same kept events at once (run with -race).
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				rec := httptest.NewRecorder()
				if _, err := a.cachedEvents(rec, httptest.NewRequest(http.MethodGet, "/api/events", nil), acc.ID); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	log(6)
	wg.Wait()
	compare("fifteen, after concurrent requests")
}
