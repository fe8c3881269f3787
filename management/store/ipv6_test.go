package store_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestIPv6Store: the IPv6 overlay's rows on both engines: an upgrade gives
// every existing account its own ULA /64 and no enabled groups, and no
// peer an address; peer addresses round-trip, are unique per account and
// move with ReaddressV6.
func TestIPv6Store(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		t.Run("upgrade", func(t *testing.T) { testIPv6Upgrade(t, e) })
		t.Run("addresses", func(t *testing.T) { testIPv6Addresses(t, e.Open(t)) })
		t.Run("export and import", func(t *testing.T) { testIPv6Dump(t, e.Open(t), e.Open(t)) })
	})
}

// testIPv6Dump: an export carries the v6 network and addresses; a dump
// from before the overlay gets a random /64; a peer address outside the
// network is refused.
func testIPv6Dump(t *testing.T, src, dst *store.Store) {
	a := account.Account{ID: "a", Domain: "netbird.selfhosted", Network: netip.MustParsePrefix("100.70.0.0/16"),
		NetworkV6: netip.MustParsePrefix("fd00:5:6:7::/64"), CreatedAt: time.Now().UTC()}
	if err := src.Tx(ctx, func(tx *store.Tx) error { return tx.InsertAccount(ctx, a) }); err != nil {
		t.Fatal(err)
	}
	p := mkPeer(t, a, 1)
	p.IPv6 = netip.MustParseAddr("fd00:5:6:7::99")
	insertPeer(t, src, p)
	var d store.Dump
	if err := src.Read(ctx, func(tx *store.Tx) error { var err error; d, err = tx.In(a.ID).Export(ctx); return err }); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	var back store.Dump
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	bad := back
	bad.Peers = append([]account.Peer(nil), back.Peers...)
	bad.Peers[0].IPv6 = netip.MustParseAddr("fd00:9::1")
	if err := dst.Tx(ctx, func(tx *store.Tx) error { return tx.Import(ctx, bad) }); err == nil {
		t.Fatal("imported a peer address outside the IPv6 network")
	}
	if err := dst.Tx(ctx, func(tx *store.Tx) error { return tx.Import(ctx, back) }); err != nil {
		t.Fatal(err)
	}
	err = dst.Read(ctx, func(tx *store.Tx) error {
		acc, err := tx.In(a.ID).Account(ctx)
		if err != nil || acc.NetworkV6 != a.NetworkV6 {
			return fmt.Errorf("imported network_v6 %s (%v), want %s", acc.NetworkV6, err, a.NetworkV6)
		}
		got, err := tx.PeerByKey(ctx, p.Key)
		if err != nil || got.IPv6 != p.IPv6 {
			return fmt.Errorf("imported peer ipv6 %s (%v), want %s", got.IPv6, err, p.IPv6)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A dump written before the overlay existed.
	old := back
	old.Account.ID, old.Account.NetworkV6, old.Peers = "b", netip.Prefix{}, nil
	old.Groups, old.Policies = nil, nil
	if err := dst.Tx(ctx, func(tx *store.Tx) error { return tx.Import(ctx, old) }); err != nil {
		t.Fatal(err)
	}
	err = dst.Read(ctx, func(tx *store.Tx) error {
		acc, err := tx.In("b").Account(ctx)
		if err != nil || acc.NetworkV6.Bits() != 64 || !netip.MustParsePrefix("fd00::/8").Contains(acc.NetworkV6.Addr()) {
			return fmt.Errorf("an old dump imported with network_v6 %s (%v)", acc.NetworkV6, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testIPv6Upgrade(t *testing.T, e storetest.Engine) {
	cfg := e.Config(t)
	old, err := store.OpenNoMigrate(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := store.MigrateTo(ctx, old, 19); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`INSERT INTO accounts (id, domain, network, serial, created_at) VALUES ('a', 'netbird.selfhosted', '100.78.0.0/16', 3, 1)`,
		`INSERT INTO accounts (id, domain, network, serial, created_at) VALUES ('b', 'netbird.selfhosted', '100.79.0.0/16', 3, 2)`,
	} {
		if err := store.ExecForTest(ctx, old, q); err != nil {
			t.Fatal(err)
		}
	}
	acc := account.Account{ID: "a", Network: netip.MustParsePrefix("100.78.0.0/16")}
	p := mkPeer(t, acc, 1)
	if err := store.ExecForTest(ctx, old, fmt.Sprintf(`INSERT INTO peers (id, account_id, wg_pub_key, ip, name, dns_label, created_at, last_login, last_seen) VALUES ('%s', 'a', '%s', '100.78.0.2', 'h', 'h', 1, 1, 1)`, p.ID, p.Key)); err != nil {
		t.Fatal(err)
	}
	old.Close()
	st, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	defer st.Close()
	err = st.Read(ctx, func(tx *store.Tx) error {
		accs, err := tx.Accounts(ctx)
		if err != nil || len(accs) != 2 {
			return fmt.Errorf("accounts %+v %v", accs, err)
		}
		ula := netip.MustParsePrefix("fd00::/8")
		for _, a := range accs {
			if a.NetworkV6.Bits() != 64 || !ula.Contains(a.NetworkV6.Addr()) || a.NetworkV6.Masked() != a.NetworkV6 {
				return fmt.Errorf("account %s: network_v6 %s, want a ULA /64", a.ID, a.NetworkV6)
			}
			if len(a.Settings.IPv6EnabledGroups) != 0 {
				return fmt.Errorf("account %s: upgraded with IPv6 groups %v", a.ID, a.Settings.IPv6EnabledGroups)
			}
		}
		if accs[0].NetworkV6 == accs[1].NetworkV6 {
			return fmt.Errorf("both accounts got %s", accs[0].NetworkV6)
		}
		got, err := tx.PeerByKey(ctx, p.Key)
		if err != nil || got.IPv6.IsValid() {
			return fmt.Errorf("peer after upgrade: ipv6 %s, %v", got.IPv6, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func testIPv6Addresses(t *testing.T, st *store.Store) {
	a := mkAccount(t, st, "a", "100.70.0.0/16")
	b := mkAccount(t, st, "b", "100.71.0.0/16")
	p1, p2 := mkPeer(t, a, 1), mkPeer(t, a, 2)
	p2.IP, p2.DNSLabel = p2.IP.Next(), "host-2b"
	ip1, ip2 := netip.MustParseAddr("fd00:1:2:3::a"), netip.MustParseAddr("fd00:1:2:3::b")
	p1.IPv6 = ip1
	insertPeer(t, st, p1)
	insertPeer(t, st, p2)
	q := mkPeer(t, b, 1)
	q.IPv6 = ip1 // the same address in another account is fine
	insertPeer(t, st, q)
	tx := func(acc account.Account, fn func(*store.AccountTx) error) error {
		return st.Tx(ctx, func(tx *store.Tx) error { return fn(tx.In(acc.ID)) })
	}
	if err := tx(a, func(at *store.AccountTx) error { return at.SetPeerIPv6(ctx, p2.ID, ip1) }); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("a taken v6 address: %v, want ErrConflict", err)
	}
	if err := tx(a, func(at *store.AccountTx) error { return at.SetPeerIPv6(ctx, p2.ID, netip.MustParseAddr("10.0.0.1")) }); err == nil {
		t.Fatal("an IPv4 address stored as ipv6")
	}
	err := tx(a, func(at *store.AccountTx) error {
		if err := at.SetPeerIPv6(ctx, p2.ID, ip2); err != nil {
			return err
		}
		taken, err := at.IPv6Taken(ctx, ip2)
		if err != nil || !taken {
			return fmt.Errorf("IPv6Taken(%s) = %v %v", ip2, taken, err)
		}
		used, err := at.UsedIPv6s(ctx)
		if err != nil || len(used) != 2 || !used[ip1] || !used[ip2] {
			return fmt.Errorf("UsedIPv6s = %v %v", used, err)
		}
		// Two peers swap addresses and the account moves network at once.
		to := netip.MustParsePrefix("fd99::/64")
		return at.ReaddressV6(ctx, to, map[account.PeerID]netip.Addr{p1.ID: netip.MustParseAddr("fd99::b"), p2.ID: netip.MustParseAddr("fd99::a")})
	})
	if err != nil {
		t.Fatal(err)
	}
	err = tx(a, func(at *store.AccountTx) error {
		acc, err := at.Account(ctx)
		if err != nil || acc.NetworkV6 != netip.MustParsePrefix("fd99::/64") {
			return fmt.Errorf("network_v6 %s %v", acc.NetworkV6, err)
		}
		g1, _ := at.Peer(ctx, p1.ID)
		g2, _ := at.Peer(ctx, p2.ID)
		if g1.IPv6 != netip.MustParseAddr("fd99::b") || g2.IPv6 != netip.MustParseAddr("fd99::a") {
			return fmt.Errorf("after readdress: %s %s", g1.IPv6, g2.IPv6)
		}
		// Taking an address away frees it for another peer.
		if err := at.SetPeerIPv6(ctx, p1.ID, netip.Addr{}); err != nil {
			return err
		}
		if err := at.SetPeerIPv6(ctx, p2.ID, netip.MustParseAddr("fd99::b")); err != nil {
			return err
		}
		// An address outside the new network is refused.
		return at.ReaddressV6(ctx, netip.MustParsePrefix("fd98::/64"), map[account.PeerID]netip.Addr{p2.ID: netip.MustParseAddr("fd99::c")})
	})
	if err == nil {
		t.Fatal("ReaddressV6 took an address outside the network")
	}
	// The failed transaction wrote nothing: p1 keeps its address.
	err = tx(a, func(at *store.AccountTx) error {
		g1, err := at.Peer(ctx, p1.ID)
		if err != nil || g1.IPv6 != netip.MustParseAddr("fd99::b") {
			return fmt.Errorf("after a failed transaction p1 has %s (%v), want fd99::b", g1.IPv6, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
