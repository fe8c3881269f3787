package store_test

import (
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestViewRevision: every write of what the REST API shows of peers,
// groups and policies bumps the account's view revision, connection state
// does not; the narrow reads (names, states, by ID, the event span) read
// what the wide ones do. Both engines.
func TestViewRevision(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		acc := mkAccount(t, st, "acc-view", "100.64.0.0/16")
		other := mkAccount(t, st, "acc-other", "100.65.0.0/16")
		rev := func() (serial, rev uint64) {
			t.Helper()
			if err := st.Read(ctx, func(tx *store.Tx) error {
				var err error
				serial, rev, err = tx.In(acc.ID).ViewRevision(ctx)
				return err
			}); err != nil {
				t.Fatal(err)
			}
			return serial, rev
		}
		step := func(name string, bumps bool, fn func(at *store.AccountTx) error) {
			t.Helper()
			s0, r0 := rev()
			if err := st.Tx(ctx, func(tx *store.Tx) error { return fn(tx.In(acc.ID)) }); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			s1, r1 := rev()
			if s1 != s0 {
				t.Errorf("%s: the serial moved %d -> %d (only BumpSerial moves it)", name, s0, s1)
			}
			if got := r1 > r0; got != bumps {
				t.Errorf("%s: view revision %d -> %d, want bumped %v", name, r0, r1, bumps)
			}
		}
		p1, p2 := mkPeer(t, acc, 1), mkPeer(t, acc, 2)
		p2.IP = p2.IP.Next()
		step("insert", true, func(at *store.AccountTx) error { return at.InsertPeer(ctx, p1) })
		step("insert if free", true, func(at *store.AccountTx) error { _, err := at.InsertPeerIfFree(ctx, p2); return err })
		insertPeer(t, st, mkPeer(t, other, 1))
		p1.Meta.UIVersion = "0.77.1"
		step("update", true, func(at *store.AccountTx) error { return at.UpdatePeer(ctx, p1) })
		step("rename", true, func(at *store.AccountTx) error { p1.Name = "renamed"; return at.UpdatePeerName(ctx, p1) })
		step("approval", true, func(at *store.AccountTx) error { return at.SetPeerApproval(ctx, p2.ID, true) })
		step("approve all", true, func(at *store.AccountTx) error { _, err := at.ApprovePendingPeers(ctx); return err })
		seen := time.Now().UTC().Truncate(time.Microsecond)
		step("connected", false, func(at *store.AccountTx) error { return at.SetPeerConnected(ctx, p2.ID, true, seen.UnixNano(), "m1") })
		g := account.Group{ID: "g1", AccountID: acc.ID, Name: "web", Peers: []account.PeerID{p1.ID}}
		step("group", true, func(at *store.AccountTx) error { return at.PutGroup(ctx, g) })
		pol := account.Policy{ID: "pol1", AccountID: acc.ID, Name: "p", Enabled: true}
		step("policy", true, func(at *store.AccountTx) error { return at.PutPolicy(ctx, pol) })
		step("delete policy", true, func(at *store.AccountTx) error { return at.DeletePolicy(ctx, pol.ID) })
		step("delete group", true, func(at *store.AccountTx) error { return at.DeleteGroup(ctx, g.ID) })
		step("readdress", true, func(at *store.AccountTx) error {
			return at.Readdress(ctx, netip.MustParsePrefix("100.66.0.0/16"), map[account.PeerID]netip.Addr{p1.ID: netip.MustParseAddr("100.66.0.1"), p2.ID: netip.MustParseAddr("100.66.0.2")})
		})

		// The narrow reads agree with Peers.
		var (
			all    []account.Peer
			names  []store.PeerName
			states []store.PeerState
			byID   []account.Peer
		)
		if err := st.Read(ctx, func(tx *store.Tx) error {
			at := tx.In(acc.ID)
			var err error
			if all, err = at.Peers(ctx); err != nil {
				return err
			}
			if names, err = at.PeerNames(ctx); err != nil {
				return err
			}
			if states, err = at.PeerStates(ctx); err != nil {
				return err
			}
			byID, err = at.PeersByID(ctx, []account.PeerID{p2.ID, "missing", p1.ID})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		var wantNames []store.PeerName
		var wantStates []store.PeerState
		for _, p := range all {
			wantNames = append(wantNames, store.PeerName{ID: p.ID, Name: p.Name, UserID: p.UserID})
			wantStates = append(wantStates, store.PeerState{ID: p.ID, Connected: p.Connected, LastSeen: p.LastSeen})
		}
		if diff := cmp.Diff(wantNames, names); diff != "" {
			t.Errorf("PeerNames (-want +got):\n%s", diff)
		}
		byState := func(a, b store.PeerState) int { return strings.Compare(string(a.ID), string(b.ID)) }
		slices.SortFunc(states, byState)
		slices.SortFunc(wantStates, byState)
		if diff := cmp.Diff(wantStates, states); diff != "" {
			t.Errorf("PeerStates (-want +got):\n%s", diff)
		}
		if len(wantStates) != 2 || !wantStates[1].Connected || !wantStates[1].LastSeen.Equal(seen) {
			t.Errorf("the connection is not read back: %+v", wantStates)
		}
		slices.SortFunc(byID, func(a, b account.Peer) int { return strings.Compare(string(a.ID), string(b.ID)) })
		if !reflect.DeepEqual(all, byID) {
			t.Errorf("PeersByID = %+v, want %+v", byID, all)
		}
		step("delete", true, func(at *store.AccountTx) error { return at.DeletePeer(ctx, p1.ID) })

		// The event span: count and newest, then the events after one.
		if err := st.Tx(ctx, func(tx *store.Tx) error {
			for range 3 {
				if _, err := tx.In(acc.ID).InsertEvent(ctx, account.Event{At: time.Now(), Activity: "peer.rename", Initiator: "u", Target: "t", Meta: map[string]string{}}); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if err := st.Read(ctx, func(tx *store.Tx) error {
			n, newest, err := tx.In(acc.ID).EventSpan(ctx)
			if err != nil || n != 3 || newest != 3 {
				t.Errorf("EventSpan = %d, %d, %v; want 3, 3", n, newest, err)
			}
			es, err := tx.In(acc.ID).EventsAfter(ctx, 1, 3)
			if err != nil || len(es) != 2 || es[0].ID != 2 || es[1].ID != 3 {
				t.Errorf("EventsAfter(1, 3) = %+v, %v; want events 2 and 3", es, err)
			}
			n, newest, err = tx.In(other.ID).EventSpan(ctx)
			if err != nil || n != 0 || newest != 0 {
				t.Errorf("another account's EventSpan = %d, %d, %v; want 0, 0", n, newest, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	})
}
