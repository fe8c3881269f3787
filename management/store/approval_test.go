package store_test

import (
	"errors"
	"testing"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestPeerApprovalStore: approval_required round-trips on both engines, a
// metadata update does not clear it, SetPeerApproval stays inside its
// account, and ApprovePendingPeers approves exactly the pending peers of
// its own account.
func TestPeerApprovalStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		a, b := mkAccount(t, st, "a", "100.70.0.0/16"), mkAccount(t, st, "b", "100.71.0.0/16")
		pending, approved, other := mkPeer(t, a, 1), mkPeer(t, a, 2), mkPeer(t, b, 3)
		pending.ApprovalRequired, other.ApprovalRequired = true, true
		approved.IP = approved.IP.Next()
		for _, p := range []account.Peer{pending, approved, other} {
			insertPeer(t, st, p)
		}
		read := func(acc account.ID, id account.PeerID) account.Peer {
			t.Helper()
			var p account.Peer
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				p, err = tx.In(acc).Peer(ctx, id)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return p
		}
		if !read(a.ID, pending.ID).ApprovalRequired || read(a.ID, approved.ID).ApprovalRequired {
			t.Fatal("approval_required did not round-trip")
		}
		// A login's update of the peer leaves it pending.
		pending.Name = "renamed"
		pending.ApprovalRequired = false
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(a.ID).UpdatePeer(ctx, pending) }); err != nil {
			t.Fatal(err)
		}
		if !read(a.ID, pending.ID).ApprovalRequired {
			t.Fatal("UpdatePeer cleared approval_required")
		}
		// Another account's view cannot approve the peer.
		err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(b.ID).SetPeerApproval(ctx, pending.ID, false) })
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("approval through another account: %v, want ErrNotFound", err)
		}
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(a.ID).SetPeerApproval(ctx, approved.ID, true) }); err != nil {
			t.Fatal(err)
		}
		var got []account.Peer
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			var err error
			got, err = tx.In(a.ID).ApprovePendingPeers(ctx)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 || got[0].ID != pending.ID || got[1].ID != approved.ID {
			t.Fatalf("approved %v, want %s and %s", got, pending.ID, approved.ID)
		}
		if read(a.ID, pending.ID).ApprovalRequired || read(a.ID, approved.ID).ApprovalRequired {
			t.Fatal("a peer is still pending after ApprovePendingPeers")
		}
		if !read(b.ID, other.ID).ApprovalRequired {
			t.Fatal("ApprovePendingPeers approved another account's peer")
		}
	})
}
