package restapi

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// TestSeedPeers is a seed-only mode for the dashboard benchmark
// (dashboard/bench/run.mjs): it adds WIREMESH_BENCH_SEED_PEERS peers
// (default 1000; a tenth as many groups, each peer in two; every third
// peer online, every fiftieth pending approval) to the oldest account of
// the SQLite store in WIREMESH_BENCH_SEED_DATADIR, which a netbird-server
// started once before (creating the owner) and stopped. It measures
// nothing itself and is skipped without that variable.
func TestSeedPeers(t *testing.T) {
	dir := os.Getenv("WIREMESH_BENCH_SEED_DATADIR")
	if dir == "" {
		t.Skip("seed-only mode for dashboard/bench: set WIREMESH_BENCH_SEED_DATADIR")
	}
	n := 1000
	if s := os.Getenv("WIREMESH_BENCH_SEED_PEERS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("WIREMESH_BENCH_SEED_PEERS=%q: want a positive number", s)
		}
		n = v
	}
	d := newDataset(n)
	ctx := context.Background()
	t0 := time.Now()
	st, err := store.Open(ctx, store.Config{Engine: store.SQLite, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	acc, err := tenant.Default(ctx, st, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	err = st.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc.ID)
		sk, _, err := setupkey.New(acc.ID, setupkey.Options{Name: "bench", Reusable: true}, now)
		if err != nil {
			return err
		}
		if err := at.InsertSetupKey(ctx, sk); err != nil {
			return fmt.Errorf("setup key: %w", err)
		}
		oses := []account.Meta{
			{GoOS: "linux", Kernel: "Linux", KernelVersion: "6.1.0", OS: "Debian GNU/Linux", OSVersion: "12"},
			{GoOS: "darwin", Kernel: "Darwin", KernelVersion: "24.1.0", OS: "macOS", OSVersion: "15.1"},
			{GoOS: "windows", Kernel: "Windows", KernelVersion: "10.0.26100", OS: "Microsoft Windows 11 Pro", OSVersion: "10.0.26100"},
		}
		for i := range d.peers {
			m := oses[i%len(oses)]
			m.Hostname, m.NetbirdVersion, m.ConnectionIP = d.hostname(i), "0.77.1", fmt.Sprintf("198.51.100.%d", i%250+1)
			p := account.Peer{ID: account.PeerID(d.peerID(i)), AccountID: acc.ID, Key: d.keys[i], IP: d.peerIP(acc.Network, i), Name: d.hostname(i), DNSLabel: d.hostname(i),
				Meta: m, SetupKeyID: sk.ID, CreatedAt: now, LastLogin: now, LastSeen: now.Add(-time.Duration(i) * time.Minute),
				Connected: i%3 == 0, ApprovalRequired: i%50 == 49}
			if err := at.InsertPeer(ctx, p); err != nil {
				return fmt.Errorf("peer %d: %w", i, err)
			}
		}
		for g := range d.groups {
			grp := account.Group{ID: account.GroupID(d.groupID(g)), AccountID: acc.ID, Name: fmt.Sprintf("group-%04d", g)}
			for _, i := range d.members(g) {
				grp.Peers = append(grp.Peers, account.PeerID(d.peerID(i)))
			}
			if err := at.PutGroup(ctx, grp); err != nil {
				return fmt.Errorf("group %d: %w", g, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed %s: %v", dir, err)
	}
	t.Logf("seeded %d peers and %d groups into %s in %v", d.peers, d.groups, dir, time.Since(t0).Round(time.Millisecond))
}
