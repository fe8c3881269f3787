package store_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// fillAccount gives an account a row in most of its tables.
func fillAccount(t *testing.T, st *store.Store, acc account.Account) {
	t.Helper()
	now := time.Now().UTC()
	for i := 1; i <= 3; i++ {
		p := mkPeer(t, acc, i)
		p.IP = netip.AddrFrom4([4]byte{acc.Network.Addr().As4()[0], acc.Network.Addr().As4()[1], 0, byte(i)})
		insertPeer(t, st, p)
	}
	u := account.User{ID: account.UserID("user-" + string(acc.ID)), AccountID: acc.ID, Email: string(acc.ID) + "@example.com", Role: account.RoleOwner,
		AutoGroups: []string{}, Issued: "api", CreatedAt: now}
	err := st.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc.ID)
		if err := at.InsertUser(ctx, u); err != nil {
			return err
		}
		if err := at.InsertToken(ctx, account.Token{ID: account.TokenID("tok-" + string(acc.ID)), AccountID: acc.ID, UserID: u.ID, Name: "t",
			Hash: "hash-tok-" + string(acc.ID), ExpiresAt: now.Add(time.Hour), CreatedBy: u.ID, CreatedAt: now}); err != nil {
			return err
		}
		if err := at.PutInvite(ctx, account.Invite{ID: account.InviteID("inv-" + string(acc.ID)), AccountID: acc.ID, Email: "new-" + string(acc.ID) + "@example.com",
			Name: "n", Role: account.RoleUser, AutoGroups: []string{}, Hash: "hash-inv-" + string(acc.ID), ExpiresAt: now.Add(time.Hour), CreatedBy: u.ID, CreatedAt: now}); err != nil {
			return err
		}
		if err := at.InsertSetupKey(ctx, mkKey(acc.ID, "key-"+string(acc.ID), 0)); err != nil {
			return err
		}
		if err := at.PutGroup(ctx, account.Group{ID: account.GroupID("g-" + string(acc.ID)), AccountID: acc.ID, Name: "devs",
			Peers: []account.PeerID{mkPeer(t, acc, 1).ID}}); err != nil {
			return err
		}
		if err := at.PutPolicy(ctx, account.Policy{ID: account.PolicyID("p-" + string(acc.ID)), AccountID: acc.ID, Name: "p", Enabled: true,
			Rules: []account.Rule{{ID: "r", Name: "r", Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll, Bidirectional: true,
				Sources: []account.GroupID{account.GroupID("g-" + string(acc.ID))}, Destinations: []account.GroupID{account.GroupID("g-" + string(acc.ID))}}}}); err != nil {
			return err
		}
		_, err := at.InsertEvent(ctx, account.Event{AccountID: acc.ID, At: now, Activity: "peer.add", Initiator: "x", Target: "y", Meta: map[string]string{}})
		return err
	})
	if err != nil {
		t.Fatalf("fill account %s: %v", acc.ID, err)
	}
}

// TestAccountAdmin: on both engines, deleting an account removes every
// row naming it and nothing of another account; re-addressing moves every
// peer at once, even onto addresses other peers held.
func TestAccountAdmin(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		t.Run("delete", func(t *testing.T) {
			st := e.Open(t)
			a, b := mkAccount(t, st, "a", "100.71.0.0/16"), mkAccount(t, st, "b", "100.72.0.0/16")
			fillAccount(t, st, a)
			fillAccount(t, st, b)
			var before map[string]int
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				before, err = tx.AccountRows(ctx, b.ID)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			for _, table := range []string{"accounts", "peers", "users", "personal_access_tokens", "invites", "setup_keys", "peer_groups", "policies", "events"} {
				if before[table] == 0 {
					t.Fatalf("account b has no row in %s: %v", table, before)
				}
			}
			if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.DeleteAccount(ctx, a.ID) }); err != nil {
				t.Fatal(err)
			}
			err := st.Read(ctx, func(tx *store.Tx) error {
				left, err := tx.AccountRows(ctx, a.ID)
				if err != nil {
					return err
				}
				if len(left) != 0 {
					return fmt.Errorf("left of the deleted account: %v", left)
				}
				after, err := tx.AccountRows(ctx, b.ID)
				if err != nil {
					return err
				}
				if fmt.Sprint(after) != fmt.Sprint(before) {
					return fmt.Errorf("the other account changed: %v, was %v", after, before)
				}
				if _, err := tx.In(a.ID).Account(ctx); !errors.Is(err, store.ErrNotFound) {
					return fmt.Errorf("deleted account read: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			// Deleting it again is not found; a failed transaction keeps all.
			if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.DeleteAccount(ctx, a.ID) }); !errors.Is(err, store.ErrNotFound) {
				t.Fatalf("second delete: %v", err)
			}
			errStop := errors.New("stop")
			if err := st.Tx(ctx, func(tx *store.Tx) error {
				if err := tx.DeleteAccount(ctx, b.ID); err != nil {
					return err
				}
				return errStop
			}); !errors.Is(err, errStop) {
				t.Fatalf("rolled back delete: %v", err)
			}
			if err := st.Read(ctx, func(tx *store.Tx) error {
				rows, err := tx.AccountRows(ctx, b.ID)
				if err == nil && fmt.Sprint(rows) != fmt.Sprint(before) {
					err = fmt.Errorf("rolled back delete left %v, want %v", rows, before)
				}
				return err
			}); err != nil {
				t.Fatal(err)
			}
		})
		t.Run("readdress", func(t *testing.T) {
			st := e.Open(t)
			a := mkAccount(t, st, "a", "10.5.0.0/24")
			fillAccount(t, st, a) // peers at .1, .2, .3
			// Rotate: each peer takes the address of the next one.
			next := netip.MustParsePrefix("10.5.0.0/25")
			ips := map[account.PeerID]netip.Addr{
				mkPeer(t, a, 1).ID: netip.MustParseAddr("10.5.0.2"),
				mkPeer(t, a, 2).ID: netip.MustParseAddr("10.5.0.3"),
				mkPeer(t, a, 3).ID: netip.MustParseAddr("10.5.0.1"),
			}
			if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(a.ID).Readdress(ctx, next, ips) }); err != nil {
				t.Fatal(err)
			}
			err := st.Read(ctx, func(tx *store.Tx) error {
				acc, err := tx.In(a.ID).Account(ctx)
				if err != nil {
					return err
				}
				if acc.Network != next {
					return fmt.Errorf("network %s, want %s", acc.Network, next)
				}
				ps, err := tx.In(a.ID).Peers(ctx)
				for _, p := range ps {
					if p.IP != ips[p.ID] {
						return fmt.Errorf("peer %s at %s, want %s", p.ID, p.IP, ips[p.ID])
					}
				}
				return err
			})
			if err != nil {
				t.Fatal(err)
			}
			// Duplicates, missing peers and addresses outside are refused.
			for name, bad := range map[string]map[account.PeerID]netip.Addr{
				"duplicate": {mkPeer(t, a, 1).ID: netip.MustParseAddr("10.5.0.9"), mkPeer(t, a, 2).ID: netip.MustParseAddr("10.5.0.9"), mkPeer(t, a, 3).ID: netip.MustParseAddr("10.5.0.8")},
				"missing":   {mkPeer(t, a, 1).ID: netip.MustParseAddr("10.5.0.9")},
				"outside":   {mkPeer(t, a, 1).ID: netip.MustParseAddr("10.6.0.9"), mkPeer(t, a, 2).ID: netip.MustParseAddr("10.5.0.7"), mkPeer(t, a, 3).ID: netip.MustParseAddr("10.5.0.8")},
			} {
				if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(a.ID).Readdress(ctx, next, bad) }); err == nil {
					t.Errorf("%s: accepted", name)
				}
			}
		})
	})
}
