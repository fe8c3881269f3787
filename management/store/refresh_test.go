package store_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/wiremesh/wiremesh/management/store"
)

// testRefresh: refresh tokens by hash, single rotation, families, trimming
// and revocation (with the access tokens issued from them), the same on
// both engines.
func testRefresh(t *testing.T, st *store.Store) {
	now := time.Now().UTC().Truncate(time.Microsecond)
	tok := func(hash, family, subject, client string, created time.Time) store.RefreshToken {
		return store.RefreshToken{Hash: hash, Family: family, Subject: subject, ClientID: client, Scopes: []string{"openid", "offline_access"},
			AMR: []string{"pwd"}, AuthTime: now, CreatedAt: created, ExpiresAt: now.Add(time.Hour), FamilyExpiresAt: now.Add(2 * time.Hour),
			AccessJTI: "jti-" + hash, AccessExpiresAt: now.Add(time.Hour)}
	}
	must := func(fn func(tx *store.Tx) error) {
		t.Helper()
		if err := st.Tx(ctx, fn); err != nil {
			t.Fatal(err)
		}
	}
	a1 := tok("h1", "fa", "alice", "dash", now)
	must(func(tx *store.Tx) error { return tx.InsertRefreshToken(ctx, a1, now) })
	must(func(tx *store.Tx) error {
		return tx.InsertRefreshToken(ctx, tok("h2", "fb", "alice", "agent", now.Add(time.Second)), now)
	})
	must(func(tx *store.Tx) error { return tx.InsertRefreshToken(ctx, tok("h3", "fc", "bob", "dash", now), now) })
	must(func(tx *store.Tx) error {
		got, err := tx.RefreshTokenByHash(ctx, "h1")
		if err != nil {
			return err
		}
		if d := cmp.Diff(a1, got); d != "" {
			t.Errorf("read back (-want +got):\n%s", d)
		}
		if _, err := tx.RefreshTokenByHash(ctx, "nope"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("unknown hash: %v", err)
		}
		fams, err := tx.RefreshFamilies(ctx, "alice")
		if d := cmp.Diff([]string{"fa", "fb"}, fams); err != nil || d != "" {
			t.Errorf("families of alice: %v %s", err, d)
		}
		return nil
	})
	// A token is rotated once; the second mark finds nothing.
	must(func(tx *store.Tx) error { return tx.MarkRefreshTokenUsed(ctx, "h1", now) })
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.MarkRefreshTokenUsed(ctx, "h1", now) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second rotation: %v", err)
	}
	for i := range 5 {
		h := "r" + string(rune('0'+i))
		must(func(tx *store.Tx) error { return tx.InsertRefreshToken(ctx, tok(h, "fa", "alice", "dash", now), now) })
		must(func(tx *store.Tx) error {
			return tx.MarkRefreshTokenUsed(ctx, h, now.Add(time.Duration(i+1)*time.Second))
		})
	}
	must(func(tx *store.Tx) error { return tx.TrimRefreshFamily(ctx, "fa", 2) })
	must(func(tx *store.Tx) error {
		for h, kept := range map[string]bool{"h1": false, "r0": false, "r3": true, "r4": true} {
			if _, err := tx.RefreshTokenByHash(ctx, h); (err == nil) != kept {
				t.Errorf("%s after trim: %v, want kept=%v", h, err, kept)
			}
		}
		return nil
	})
	// Logout of one client leaves the other; its access tokens are revoked.
	must(func(tx *store.Tx) error { return tx.DeleteRefreshTokensOf(ctx, "alice", "agent", now) })
	must(func(tx *store.Tx) error {
		if n, err := tx.CountRefreshTokens(ctx, "alice"); err != nil || n != 2 {
			t.Errorf("alice's tokens after logout of the agent: %d %v", n, err)
		}
		if rev, err := tx.AccessTokenRevoked(ctx, "jti-h2"); err != nil || !rev {
			t.Errorf("access token of the logged-out client: revoked=%v %v", rev, err)
		}
		return nil
	})
	must(func(tx *store.Tx) error { return tx.DeleteRefreshFamily(ctx, "fa", now) })
	must(func(tx *store.Tx) error { return tx.DeleteRefreshTokensOf(ctx, "bob", "", now) })
	must(func(tx *store.Tx) error {
		for _, s := range []string{"alice", "bob"} {
			if n, err := tx.CountRefreshTokens(ctx, s); err != nil || n != 0 {
				t.Errorf("%s's tokens after revocation: %d %v", s, n, err)
			}
		}
		if rev, err := tx.AccessTokenRevoked(ctx, "jti-r4"); err != nil || !rev {
			t.Errorf("access token of a revoked family: revoked=%v %v", rev, err)
		}
		return nil
	})
	// Families past their end are dropped when a token is stored.
	must(func(tx *store.Tx) error {
		return tx.InsertRefreshToken(ctx, tok("old", "fo", "carol", "dash", now), now)
	})
	later := now.Add(3 * time.Hour)
	must(func(tx *store.Tx) error {
		return tx.InsertRefreshToken(ctx, tok("new", "fn", "dave", "dash", later), later)
	})
	must(func(tx *store.Tx) error {
		if _, err := tx.RefreshTokenByHash(ctx, "old"); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("expired family kept: %v", err)
		}
		return nil
	})
}
