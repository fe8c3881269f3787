package server_test

import (
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/pgtest"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Two management instances on one Postgres: a change made through either
// reaches the streams of the other through store notifications (the poll
// is then 10 s apart, so a quick arrival proves they work), and the
// connected state follows a peer that moves between them.
func TestInstancesShareChanges(t *testing.T) {
	pg := pgtest.Start(t)
	cfg := store.Config{Engine: store.Postgres, DSN: pg.NewDatabase(t)}
	e1 := startWith(t, "", server.Options{Store: cfg, Instance: "m1", Heartbeat: 200 * time.Millisecond})
	e2 := startWith(t, "", server.Options{Store: cfg, Instance: "m2"})
	for _, e := range []*env{e1, e2} {
		deadline := time.Now().Add(10 * time.Second)
		for !e.srv.Listening() {
			if time.Now().After(deadline) {
				t.Fatal("instance not listening for store notifications")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	_, secret := e1.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)

	a, b := testpeer.New(e1.conn, "alpha"), testpeer.New(e2.conn, "beta")
	if _, err := a.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	sa, err := a.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	// b registers through m2; a, streaming from m1, must learn of it.
	start := time.Now()
	if _, err := b.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, sa, 2*time.Second, b.Public())
	t.Logf("a change through m2 reached a stream on m1 in %v", time.Since(start).Round(time.Millisecond))
	sb, err := b.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	waitPeers(t, sb, 2*time.Second, a.Public())

	// A third peer through m1 reaches b on m2.
	cp := testpeer.New(e1.conn, "gamma")
	start = time.Now()
	if _, err := cp.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, sb, 2*time.Second, a.Public(), cp.Public())
	t.Logf("a change through m1 reached a stream on m2 in %v", time.Since(start).Round(time.Millisecond))

	// a moves to m2; m1 sees its old stream close afterwards: a stays
	// connected.
	a2 := testpeer.WithKey(e2.conn, "alpha", a.Priv)
	sa2, err := a2.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sa2.Close()
	sa.Close()
	time.Sleep(300 * time.Millisecond)
	if !connectedIn(t, e2, a.Public()) {
		t.Fatal("a marked offline by the instance it left")
	}
	// m1 is taken for dead (as when its heartbeats could not reach the
	// store): the others record its peers offline; its next beat records
	// them online again. cp streams from m1.
	scp, err := cp.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer scp.Close()
	if err := e2.srv.Store.Tx(c, func(tx *store.Tx) error { return tx.RemoveInstance(c, "m1", time.Now().UnixNano()) }); err != nil {
		t.Fatal(err)
	}
	if connectedIn(t, e2, cp.Public()) {
		t.Fatal("peer of a removed instance still connected")
	}
	for deadline := time.Now().Add(5 * time.Second); !connectedIn(t, e2, cp.Public()); time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("an instance taken for dead did not record its peers online again")
		}
	}

	// m2 stops cleanly: its peers are offline at once for m1.
	e2.stop()
	if connectedIn(t, e1, a.Public()) || connectedIn(t, e1, b.Public()) {
		t.Fatal("peers of a stopped instance still connected")
	}
}

func waitPeers(t *testing.T, s *testpeer.Stream, within time.Duration, keys ...key.Public) {
	t.Helper()
	if err := s.WaitFor(within, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(s.LatestMap(), keys...) }); err != nil {
		t.Fatalf("map lacks peers within %v: %v", within, err)
	}
}

func connectedIn(t *testing.T, e *env, k key.Public) bool {
	t.Helper()
	var p account.Peer
	c := ctx(t)
	acc, err := tenant.Default(c, e.srv.Store, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	err = e.srv.Store.Read(c, func(tx *store.Tx) (err error) {
		p, err = tx.PeerByKey(c, k)
		return
	})
	if err != nil || p.AccountID != acc.ID {
		t.Fatalf("peer %s: %v", k, err)
	}
	return p.Connected
}
