package bench

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/tenant"
)

type nopNotifier struct{}

func (nopNotifier) AccountChanged(account.ID) {}

// TestBenchStore registers 10,000 peers in one account on each engine (8
// concurrent registrations, durable commits) and then reads the account's
// network map as management does for every Sync: the account row and all
// its peers, and the map computation on top.
func TestBenchStore(t *testing.T) {
	requireBench(t)
	const peersN, workers, reads = 10000, 8, 20
	ctx := context.Background()
	var report []string
	add := func(f string, a ...any) {
		report = append(report, fmt.Sprintf(f, a...))
		t.Log(report[len(report)-1])
	}
	rates := map[store.Engine]float64{}
	readTimes := map[store.Engine]time.Duration{}
	for _, e := range storetest.Engines(t) {
		st := e.Open(t)
		acc, err := tenant.Default(ctx, st, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		k, secret, err := setupkey.New(acc.ID, setupkey.Options{Reusable: true}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, k) }); err != nil {
			t.Fatal(err)
		}
		svc := peers.New(st, nopNotifier{}, nil, nil)
		keys := make([]key.Public, peersN)
		for i := range keys {
			pk, _ := key.NewPrivate()
			keys[i] = pk.Public()
		}
		start := time.Now()
		var wg sync.WaitGroup
		next := make(chan int)
		for range workers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if _, _, err := svc.Login(ctx, peers.LoginInput{Key: keys[i], SetupKey: secret, Meta: account.Meta{Hostname: fmt.Sprintf("host-%d", i), OS: "linux"}}); err != nil {
						t.Error(err)
					}
				}
			}()
		}
		for i := range peersN {
			next <- i
		}
		close(next)
		wg.Wait()
		took := time.Since(start)
		rates[e.Name] = peersN / took.Seconds()
		add("%s: %d registrations in %v: %.0f/s", e.Name, peersN, took.Round(time.Millisecond), rates[e.Name])

		var loadTotal, computeTotal time.Duration
		for i := range reads {
			t0 := time.Now()
			var (
				a  account.Account
				ps []account.Peer
			)
			err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				if a, err = tx.In(acc.ID).Account(ctx); err != nil {
					return err
				}
				ps, err = tx.In(acc.ID).Peers(ctx)
				return err
			})
			if err != nil || len(ps) != peersN {
				t.Fatalf("read: %d peers, %v", len(ps), err)
			}
			t1 := time.Now()
			all, pol := store.DefaultAccess(acc.ID)
			if _, ok := networkmap.Compute(a, ps, networkmap.Access{Groups: []account.Group{all}, Policies: []account.Policy{pol}}, ps[i].ID); !ok {
				t.Fatal("peer missing from its map")
			}
			loadTotal += t1.Sub(t0)
			computeTotal += time.Since(t1)
		}
		readTimes[e.Name] = loadTotal / reads
		add("%s: network map of a %d-peer account: load %v, compute %v (mean of %d)", e.Name, peersN,
			(loadTotal / reads).Round(time.Microsecond), (computeTotal / reads).Round(time.Microsecond), reads)
	}
	add("RATIO postgres / sqlite registrations per second: %.2f", rates[store.Postgres]/rates[store.SQLite])
	add("RATIO postgres / sqlite map load time: %.2f", float64(readTimes[store.Postgres])/float64(readTimes[store.SQLite]))
	appendReport(t, report)
}
