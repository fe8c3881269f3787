package peers_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// TestSSHKeyUnique: a peer cannot register with, or switch to, an SSH
// key another peer of the account reports (whatever the comment), and
// nothing of the refused login is stored; its own key it keeps.
func TestSSHKeyUnique(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		ctx := context.Background()
		st := e.Open(t)
		acc, err := tenant.Default(ctx, st, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		k, secret, err := setupkey.New(acc.ID, setupkey.Options{Name: "ssh", Reusable: true}, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(acc.ID).InsertSetupKey(ctx, k) }); err != nil {
			t.Fatal(err)
		}
		svc := peers.New(st, nopNotifier{}, slog.New(slog.DiscardHandler), nil)
		const victimKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVpY3RpbS1rZXktbWF0ZXJpYWwtMzItYnl0ZXMh victim"
		login := func(pk key.Public, ssh string) error {
			_, _, err := svc.Login(ctx, peers.LoginInput{Key: pk, SetupKey: secret, Meta: account.Meta{Hostname: "h"}, SSHPubKey: ssh})
			return err
		}
		victim, _ := key.NewPrivate()
		if err := login(victim.Public(), victimKey); err != nil {
			t.Fatal(err)
		}
		// The victim logs in again with its own key: fine.
		if err := login(victim.Public(), victimKey+" renamed"); err != nil {
			t.Fatalf("victim's own key again: %v", err)
		}
		thief, _ := key.NewPrivate()
		if err := login(thief.Public(), "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHVpY3RpbS1rZXktbWF0ZXJpYWwtMzItYnl0ZXMh other-comment"); !errors.Is(err, peers.ErrSSHKeyTaken) {
			t.Fatalf("registering with the victim's key: %v, want ErrSSHKeyTaken", err)
		}
		if _, err := readPeerByKey(ctx, st, thief.Public()); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("refused registration stored: %v", err)
		}
		if err := login(thief.Public(), "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHRoaWVmLWtleS1tYXRlcmlhbC0zMi1ieXRlcyEhIQ== thief"); err != nil {
			t.Fatal(err)
		}
		if err := login(thief.Public(), victimKey); !errors.Is(err, peers.ErrSSHKeyTaken) {
			t.Fatalf("switching to the victim's key: %v, want ErrSSHKeyTaken", err)
		}
		p, err := readPeerByKey(ctx, st, thief.Public())
		if err != nil || p.SSHPubKey == victimKey {
			t.Fatalf("refused update stored: %+v %v", p.SSHPubKey, err)
		}
		// Peers without an SSH key are never in each other's way.
		for range 2 {
			pk, _ := key.NewPrivate()
			if err := login(pk.Public(), ""); err != nil {
				t.Fatal(err)
			}
		}
	})
}

func readPeerByKey(ctx context.Context, st *store.Store, k key.Public) (account.Peer, error) {
	var p account.Peer
	err := st.Read(ctx, func(tx *store.Tx) error {
		var err error
		p, err = tx.PeerByKey(ctx, k)
		return err
	})
	return p, err
}
