package store_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
)

// TestJobsStore: jobs and bundles round-trip on both engines (the bundle
// byte for byte, through BYTEA), a delivery is claimed once, a bundle is
// stored once per token and only within the window, other accounts see
// nothing, the capability upsert writes only changes, and the sweeps fail
// stale jobs and delete old bundles.
func TestJobsStore(t *testing.T) {
	storetest.Each(t, func(t *testing.T, e storetest.Engine) {
		st := e.Open(t)
		a, b := mkAccount(t, st, "a", "100.70.0.0/16"), mkAccount(t, st, "b", "100.71.0.0/16")
		p := mkPeer(t, a, 1)
		insertPeer(t, st, p)
		tx := func(fn func(tx *store.Tx) error) {
			t.Helper()
			if err := st.Tx(ctx, fn); err != nil {
				t.Fatal(err)
			}
		}
		base := time.Unix(1_800_000_000, 0).UTC()
		j := account.Job{ID: "job-1", AccountID: a.ID, PeerID: p.ID, TriggeredBy: "u1", Params: account.BundleParams{BundleFor: true, BundleForTime: 2, LogFileCount: 7},
			Status: account.JobPending, CreatedAt: base}
		tx(func(tx *store.Tx) error { return tx.In(a.ID).InsertJob(ctx, j) })
		var supported bool
		tx(func(tx *store.Tx) error {
			if err := tx.In(a.ID).SetJobSupport(ctx, p.ID, true); err != nil {
				return err
			}
			if err := tx.In(a.ID).SetJobSupport(ctx, p.ID, true); err != nil { // unchanged: no write
				return err
			}
			var err error
			supported, err = tx.In(a.ID).JobSupport(ctx, p.ID)
			return err
		})
		if !supported {
			t.Fatal("job support did not round-trip")
		}
		// Another account sees nothing.
		err := st.Read(ctx, func(tx *store.Tx) error { _, err := tx.In(b.ID).Job(ctx, p.ID, j.ID); return err })
		if !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("job through another account: %v", err)
		}
		// Claimed once.
		var first, second bool
		tx(func(tx *store.Tx) error {
			var err error
			if first, err = tx.In(a.ID).ClaimJob(ctx, j.ID, "hash-1", base.Add(time.Second).UnixNano()); err != nil {
				return err
			}
			second, err = tx.In(a.ID).ClaimJob(ctx, j.ID, "hash-2", base.Add(time.Second).UnixNano())
			return err
		})
		if !first || second {
			t.Fatalf("claims: %v then %v, want true then false", first, second)
		}
		data := append([]byte{0x1f, 0x8b, 0, 0xff}, bytes.Repeat([]byte{0, 1, 2, 0xfe}, 1000)...)
		var stored, again bool
		tx(func(tx *store.Tx) error {
			var err error
			// Another token than the job's (it was handed out again).
			if stale, err := tx.In(a.ID).StoreBundle(ctx, j.ID, "hash-other", data, "key-0", base.UnixNano(), base.Add(2*time.Second).UnixNano()); err != nil || stale {
				return fmt.Errorf("bundle with a token not the job's: stored %v, %v", stale, err)
			}
			if stored, err = tx.In(a.ID).StoreBundle(ctx, j.ID, "hash-1", data, "key-1", base.UnixNano(), base.Add(2*time.Second).UnixNano()); err != nil {
				return err
			}
			again, err = tx.In(a.ID).StoreBundle(ctx, j.ID, "hash-1", data, "key-2", base.UnixNano(), base.Add(3*time.Second).UnixNano())
			return err
		})
		if !stored || again {
			t.Fatalf("bundle stored %v then %v, want true then false", stored, again)
		}
		var got []byte
		var byToken account.Job
		if err := st.Read(ctx, func(tx *store.Tx) error {
			var err error
			if got, err = tx.In(a.ID).JobBundle(ctx, p.ID, j.ID); err != nil {
				return err
			}
			byToken, err = tx.JobByToken(ctx, "hash-1")
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, data) || byToken.UploadKey != "key-1" || byToken.Params != j.Params || !byToken.DeliveredAt.Equal(base.Add(time.Second)) {
			t.Fatalf("bundle identical %v; job by token %+v", bytes.Equal(got, data), byToken)
		}
		// A second job, delivered long ago and never answered, and a third
		// never delivered: the sweep fails both, with their reasons.
		j2, j3 := j, j
		j2.ID, j3.ID = "job-2", "job-3"
		tx(func(tx *store.Tx) error {
			if err := tx.In(a.ID).InsertJob(ctx, j2); err != nil {
				return err
			}
			if err := tx.In(a.ID).InsertJob(ctx, j3); err != nil {
				return err
			}
			_, err := tx.In(a.ID).ClaimJob(ctx, j2.ID, "hash-3", base.UnixNano())
			return err
		})
		var failed int64
		tx(func(tx *store.Tx) error {
			var err error
			failed, err = tx.FailStaleJobs(ctx, base.Add(time.Minute).UnixNano(), "never", base.Add(30*time.Second).UnixNano(), "silent", base.Add(time.Hour).UnixNano())
			return err
		})
		// job-1 was delivered too and has no answer yet: it fails as well.
		if failed != 3 {
			t.Fatalf("failed %d stale jobs, want 3", failed)
		}
		var js []account.Job
		if err := st.Read(ctx, func(tx *store.Tx) error { var err error; js, err = tx.In(a.ID).Jobs(ctx, p.ID); return err }); err != nil {
			t.Fatal(err)
		}
		reasons := map[account.JobID]string{}
		for _, x := range js {
			reasons[x.ID] = x.FailedReason
		}
		if reasons["job-2"] != "silent" || reasons["job-3"] != "never" {
			t.Fatalf("reasons %v", reasons)
		}
		var deleted int64
		tx(func(tx *store.Tx) error {
			var err error
			deleted, err = tx.DeleteBundlesBefore(ctx, base.Add(time.Hour).UnixNano(), 10)
			return err
		})
		err = st.Read(ctx, func(tx *store.Tx) error { _, err := tx.In(a.ID).JobBundle(ctx, p.ID, j.ID); return err })
		if deleted != 1 || !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("deleted %d bundles, then read: %v", deleted, err)
		}
	})
}
