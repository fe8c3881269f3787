package v6addr_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/v6addr"
)

var ctx = context.Background()

// TestRule walks the address rule on both engines: who gets an address,
// who keeps it, who loses it, and an admin's choice.
func TestRule(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) { testRule(t, e.Open(t)) })
}

func testRule(t *testing.T, st *store.Store) {
	net6 := netip.MustParsePrefix("fd00:aa:bb:cc::/64")
	acc := account.Account{ID: "a", Domain: "x.y", Network: netip.MustParsePrefix("100.70.0.0/16"), NetworkV6: net6, CreatedAt: time.Now(),
		Settings: account.DefaultSettings()}
	all, _ := store.DefaultAccess(acc.ID)
	grp := account.Group{ID: "g", AccountID: acc.ID, Name: "g", Peers: []account.PeerID{}}
	acc.Settings.IPv6EnabledGroups = []account.GroupID{all.ID}
	mk := func(n int, v6, disable, temporary bool) account.Peer {
		k, err := key.NewPrivate()
		if err != nil {
			t.Fatal(err)
		}
		return account.Peer{ID: account.PeerID(fmt.Sprint("p", n)), AccountID: acc.ID, Key: k.Public(),
			IP: netip.AddrFrom4([4]byte{100, 70, 0, byte(n)}), Name: fmt.Sprint("p", n), DNSLabel: fmt.Sprint("p", n), Temporary: temporary,
			Meta: account.Meta{Hostname: "h", IPv6Overlay: v6, Flags: account.LocalFlags{DisableIPv6: disable}}, CreatedAt: time.Now()}
	}
	capable, plain, disabled, temp := mk(1, true, false, false), mk(2, false, false, false), mk(3, true, true, false), mk(4, true, false, true)
	tx := func(fn func(at *store.AccountTx) error) {
		t.Helper()
		if err := st.Tx(ctx, func(tx *store.Tx) error { return fn(tx.In(acc.ID)) }); err != nil {
			t.Fatal(err)
		}
	}
	err := st.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.InsertAccount(ctx, acc); err != nil {
			return err
		}
		at := tx.In(acc.ID)
		for _, g := range []account.Group{all, grp} {
			if err := at.PutGroup(ctx, g); err != nil {
				return err
			}
		}
		for _, p := range []account.Peer{capable, plain, disabled, temp} {
			if err := at.InsertPeer(ctx, p); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	addrs := func() map[account.PeerID]netip.Addr {
		t.Helper()
		out := map[account.PeerID]netip.Addr{}
		tx(func(at *store.AccountTx) error {
			ps, err := at.Peers(ctx)
			for _, p := range ps {
				out[p.ID] = p.IPv6
			}
			return err
		})
		return out
	}
	// Login: only the capable peer of an enabled group gets one.
	for _, p := range []account.Peer{capable, plain, disabled, temp} {
		tx(func(at *store.AccountTx) error {
			_, changed, err := v6addr.Assign(ctx, at, acc, &p)
			if want := p.ID == capable.ID; changed != want || err != nil {
				return fmt.Errorf("Assign(%s) = %v, %v; want %v", p.ID, changed, err, want)
			}
			return nil
		})
	}
	got := addrs()
	first := got[capable.ID]
	if !net6.Contains(first) || got[plain.ID].IsValid() || got[disabled.ID].IsValid() || got[temp.ID].IsValid() {
		t.Fatalf("after logins: %v", got)
	}
	// A second login changes nothing, also once the capability is gone.
	capable.IPv6, capable.Meta.IPv6Overlay = first, false
	tx(func(at *store.AccountTx) error {
		if err := at.UpdatePeer(ctx, capable); err != nil {
			return err
		}
		if _, changed, err := v6addr.Assign(ctx, at, acc, &capable); changed || err != nil {
			return fmt.Errorf("Assign again = %v, %v", changed, err)
		}
		return nil
	})
	if got := addrs(); got[capable.ID] != first {
		t.Fatalf("without the capability the peer has %s, want %s kept", got[capable.ID], first)
	}
	// Enabled group g without the peer: it loses the address; the peer
	// joins g: Reconcile gives an address only to a capable peer, so
	// none to it now, and one once it reports the capability again.
	acc.Settings.IPv6EnabledGroups = []account.GroupID{grp.ID}
	tx(func(at *store.AccountTx) error {
		if err := at.UpdateSettings(ctx, acc.Settings); err != nil {
			return err
		}
		changed, err := v6addr.Reconcile(ctx, at, acc)
		if !changed || err != nil {
			return fmt.Errorf("Reconcile = %v, %v", changed, err)
		}
		return nil
	})
	if got := addrs(); got[capable.ID].IsValid() {
		t.Fatalf("outside the enabled groups the peer keeps %s", got[capable.ID])
	}
	grp.Peers = []account.PeerID{capable.ID, plain.ID}
	tx(func(at *store.AccountTx) error {
		if err := at.PutGroup(ctx, grp); err != nil {
			return err
		}
		if changed, err := v6addr.GroupsChanged(ctx, at, all.ID); changed || err != nil {
			return fmt.Errorf("GroupsChanged(All) = %v, %v; All is not enabled", changed, err)
		}
		if changed, err := v6addr.GroupsChanged(ctx, at, grp.ID); changed || err != nil {
			return fmt.Errorf("GroupsChanged(g) = %v, %v; nobody capable", changed, err)
		}
		return nil
	})
	capable.IPv6 = netip.Addr{}
	capable.Meta.IPv6Overlay = true
	tx(func(at *store.AccountTx) error {
		if err := at.UpdatePeer(ctx, capable); err != nil {
			return err
		}
		changed, err := v6addr.GroupsChanged(ctx, at, grp.ID)
		if !changed || err != nil {
			return fmt.Errorf("GroupsChanged(g) = %v, %v", changed, err)
		}
		return nil
	})
	got = addrs()
	if !net6.Contains(got[capable.ID]) || got[plain.ID].IsValid() {
		t.Fatalf("after joining g: %v", got)
	}
	// An admin's address.
	capable.IPv6 = got[capable.ID]
	for _, tc := range []struct {
		p    account.Peer
		ip   string
		want error
	}{
		{disabled, "fd00:aa:bb:cc::5", v6addr.ErrNotEnabled},
		{capable, "fd00:aa:bb:cd::5", v6addr.ErrBadAddress},
		{capable, "fd00:aa:bb:cc::", v6addr.ErrBadAddress},
		{plain, capable.IPv6.String(), v6addr.ErrBadAddress},
		{plain, "fd00:aa:bb:cc::5", nil}, // plain is in g: it may hold one
	} {
		err := st.Tx(ctx, func(tx *store.Tx) error { return v6addr.Set(ctx, tx.In(acc.ID), acc, tc.p, netip.MustParseAddr(tc.ip)) })
		if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Set(%s, %s) = %v, want %v", tc.p.ID, tc.ip, err, tc.want)
		}
	}
	// A new range moves both, keeping interface IDs.
	tx(func(at *store.AccountTx) error {
		return v6addr.Readdress(ctx, at, netip.MustParsePrefix("fd00:1::/64"))
	})
	got = addrs()
	if got[plain.ID] != netip.MustParseAddr("fd00:1::5") || !netip.MustParsePrefix("fd00:1::/64").Contains(got[capable.ID]) {
		t.Fatalf("after the move: %v", got)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		return v6addr.Readdress(ctx, tx.In(acc.ID), netip.MustParsePrefix("fd00:2::/127"))
	})
	if err == nil {
		t.Fatal("Readdress into a /127 succeeded")
	}
}
