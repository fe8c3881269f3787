package server_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/pgtest"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// TestTemporaryPeerAcrossInstances: two instances on one Postgres. A
// temporary peer made through m1 streams from m2 and the target, on m1,
// sees it; when it moves to m1, the end of its old stream on m2 does not
// remove it; when its stream on m1 ends it goes, and the target's map
// drops it.
func TestTemporaryPeerAcrossInstances(t *testing.T) {
	pg := pgtest.Start(t)
	cfg := store.Config{Engine: store.Postgres, DSN: pg.NewDatabase(t)}
	e1 := startWith(t, "", server.Options{Store: cfg, Instance: "m1"})
	e2 := startWith(t, "", server.Options{Store: cfg, Instance: "m2"})
	_, secret := e1.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	target := testpeer.New(e1.conn, "target")
	if _, err := target.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	st, err := target.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	acc, err := tenant.Default(c, e1.srv.Store, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var targetID account.PeerID
	if err := e1.srv.Store.Read(c, func(tx *store.Tx) error {
		p, err := tx.PeerByKey(c, target.Public())
		targetID = p.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	priv, _ := key.NewPrivate()
	if _, err := e1.srv.Peers.CreateTemporary(c, acc.ID, targetID, peers.TemporaryInput{Name: "web", Key: priv.Public().String(), Rules: []string{"tcp/22"}}, "admin"); err != nil {
		t.Fatal(err)
	}
	on2 := testpeer.WithKey(e2.conn, "web", priv)
	if _, err := on2.Login(c, ""); err != nil {
		t.Fatal(err)
	}
	s2, err := on2.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	waitPeers(t, s2, 2*time.Second, target.Public())
	waitPeers(t, st, 2*time.Second, on2.Public())

	// It moves to m1; its old stream on m2 ends afterwards.
	on1 := testpeer.WithKey(e1.conn, "web", priv)
	s1, err := on1.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	waitPeers(t, s1, 2*time.Second, target.Public())
	s2.Close()
	time.Sleep(500 * time.Millisecond)
	if !connectedIn(t, e2, priv.Public()) {
		t.Fatal("the temporary peer was removed or marked offline by the instance it left")
	}

	// Its stream on m1 ends: it goes, for both instances.
	s1.Close()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := e2.srv.Store.Read(c, func(tx *store.Tx) error { _, err := tx.PeerByKey(c, priv.Public()); return err })
		if errors.Is(err, store.ErrNotFound) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("temporary peer still there after its last stream ended: %v", err)
		}
	}
	waitPeers(t, st, 2*time.Second)
}
