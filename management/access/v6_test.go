package access_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/access"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

type noNotify struct{}

func (noNotify) AccountChanged(account.ID) {}

// TestDeleteGroupRacingIPv6Settings: a group deleted while a settings
// change naming it in ipv6_enabled_groups is in flight is refused once
// that change commits, so the settings never name a deleted group.
// SQLite's transactions exclude each other; only Postgres runs them
// concurrently.
func TestDeleteGroupRacingIPv6Settings(t *testing.T) {
	ctx := context.Background()
	var pg storetest.Engine
	for _, e := range storetest.Engines(t) {
		if e.Name == store.Postgres {
			pg = e
		}
	}
	st := pg.Open(t)
	acc := account.Account{ID: "a", Domain: "x.y", Network: netip.MustParsePrefix("100.70.0.0/16"),
		NetworkV6: netip.MustParsePrefix("fd00:aa::/64"), CreatedAt: time.Now(), Settings: account.DefaultSettings()}
	err := st.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.InsertAccount(ctx, acc); err != nil {
			return err
		}
		return tx.In(acc.ID).PutGroup(ctx, account.Group{ID: "g", AccountID: acc.ID, Name: "g"})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The settings change: holds the account, names g, not yet committed.
	locked, release, settled := make(chan error, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		settled <- st.Tx(ctx, func(tx *store.Tx) error {
			at := tx.In(acc.ID)
			cur, err := at.Lock(ctx)
			if err == nil {
				cur.Settings.IPv6EnabledGroups = []account.GroupID{"g"}
				err = at.UpdateSettings(ctx, cur.Settings)
			}
			locked <- err
			<-release
			return err
		})
	}()
	if err := <-locked; err != nil {
		close(release)
		t.Fatal(err)
	}
	svc := access.New(st, noNotify{}, nil)
	deleted := make(chan error, 1)
	go func() { deleted <- svc.DeleteGroup(ctx, acc.ID, "g", "admin") }()
	time.Sleep(300 * time.Millisecond) // let the delete reach its reads
	close(release)
	if err := <-settled; err != nil {
		t.Fatal(err)
	}
	if err := <-deleted; !errors.Is(err, access.ErrInUse) {
		t.Errorf("DeleteGroup = %v, want ErrInUse (the settings name the group)", err)
	}
	err = st.Read(ctx, func(tx *store.Tx) error {
		at := tx.In(acc.ID)
		cur, err := at.Account(ctx)
		if err != nil {
			return err
		}
		if _, err := at.Group(ctx, "g"); err != nil {
			t.Errorf("ipv6_enabled_groups %v names group g, which is gone: %v", cur.Settings.IPv6EnabledGroups, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
