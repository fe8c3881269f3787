package store_test

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/store"
)

func testIdentity(t *testing.T, st *store.Store) {
	a := mkAccount(t, st, "a", "100.81.0.0/16")
	b := mkAccount(t, st, "b", "100.82.0.0/16")
	now := time.Now().UTC().Truncate(time.Microsecond)
	owner := account.User{ID: "google-oauth2|42@x", AccountID: a.ID, Email: "Owner@Example.com", Name: "Owner", Role: account.RoleOwner,
		AutoGroups: []string{"g1"}, Issued: "jwt", CreatedAt: now}
	tok := account.Token{ID: "t1", AccountID: a.ID, UserID: owner.ID, Name: "ci", Hash: "hash-t1", ExpiresAt: now.Add(time.Hour), CreatedBy: owner.ID, CreatedAt: now}
	inv := account.Invite{ID: "i1", AccountID: a.ID, Email: "new@example.com", Name: "New", Role: account.RoleUser, Hash: "hash-i1", ExpiresAt: now.Add(time.Hour), CreatedBy: owner.ID, CreatedAt: now}
	peer := mkPeer(t, a, 1)
	peer.UserID, peer.LoginExpirationEnabled = owner.ID, true
	err := st.Tx(ctx, func(tx *store.Tx) error {
		in := tx.In(a.ID)
		if err := in.InsertUser(ctx, owner); err != nil {
			return err
		}
		if err := in.InsertToken(ctx, tok); err != nil {
			return err
		}
		if err := in.PutInvite(ctx, inv); err != nil {
			return err
		}
		if err := in.InsertPeer(ctx, peer); err != nil {
			return err
		}
		return tx.InsertCredential(ctx, account.Credential{Subject: owner.ID, Email: owner.Email, Name: owner.Name, PasswordHash: "bcrypt", CreatedAt: now})
	})
	if err != nil {
		t.Fatal(err)
	}
	// The same user ID in another account, a second invite for the same
	// address and a second credential with the same address conflict.
	for name, fn := range map[string]func(tx *store.Tx) error{
		"user id": func(tx *store.Tx) error { u := owner; u.AccountID = b.ID; return tx.In(b.ID).InsertUser(ctx, u) },
		"invite email": func(tx *store.Tx) error {
			v := inv
			v.ID, v.Hash = "i2", "hash-i2"
			return tx.In(a.ID).PutInvite(ctx, v)
		},
		"credential": func(tx *store.Tx) error {
			return tx.InsertCredential(ctx, account.Credential{Subject: "other", Email: "owner@example.com", PasswordHash: "x", CreatedAt: now})
		},
	} {
		if err := st.Tx(ctx, fn); !errors.Is(err, store.ErrConflict) {
			t.Errorf("duplicate %s: %v, want ErrConflict", name, err)
		}
	}
	err = st.Read(ctx, func(tx *store.Tx) error {
		u, err := tx.UserByID(ctx, owner.ID)
		if err != nil || u.AccountID != a.ID || u.Role != account.RoleOwner || len(u.AutoGroups) != 1 {
			return fmt.Errorf("user by id: %+v %v", u, err)
		}
		if u, err = tx.In(a.ID).UserByEmail(ctx, "owner@EXAMPLE.com"); err != nil || u.ID != owner.ID {
			return fmt.Errorf("user by email: %+v %v", u, err)
		}
		if ok, err := tx.In(a.ID).HasOwner(ctx); !ok || err != nil {
			return fmt.Errorf("has owner: %v %v", ok, err)
		}
		if ok, err := tx.In(b.ID).HasOwner(ctx); ok || err != nil {
			return fmt.Errorf("b has owner: %v %v", ok, err)
		}
		got, err := tx.TokenByHash(ctx, "hash-t1")
		if err != nil || got.UserID != owner.ID || !got.ExpiresAt.Equal(tok.ExpiresAt) {
			return fmt.Errorf("token by hash: %+v %v", got, err)
		}
		if v, err := tx.InviteByHash(ctx, "hash-i1"); err != nil || v.Email != inv.Email {
			return fmt.Errorf("invite by hash: %+v %v", v, err)
		}
		if c, err := tx.CredentialByEmail(ctx, "OWNER@example.com"); err != nil || c.Subject != owner.ID {
			return fmt.Errorf("credential: %+v %v", c, err)
		}
		ps, err := tx.In(a.ID).UserPeers(ctx, owner.ID)
		if err != nil || len(ps) != 1 || ps[0].UserID != owner.ID || !ps[0].LoginExpirationEnabled {
			return fmt.Errorf("user peers: %+v %v", ps, err)
		}
		acc, err := tx.In(a.ID).Account(ctx)
		if err != nil || !reflect.DeepEqual(acc.Settings, account.Settings{}) {
			return fmt.Errorf("account settings: %+v %v", acc.Settings, err)
		}
		// Account b sees none of a's identity rows.
		other := tx.In(b.ID)
		if _, err := other.User(ctx, owner.ID); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("b read a's user: %v", err)
		}
		if _, err := other.Token(ctx, owner.ID, tok.ID); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("b read a's token: %v", err)
		}
		if _, err := other.Invite(ctx, inv.ID); !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("b read a's invite: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// b cannot change a's rows by ID.
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(b.ID).DeleteUser(ctx, owner.ID) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("b deleted a's user: %v", err)
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.In(b.ID).DeleteToken(ctx, owner.ID, tok.ID) }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("b deleted a's token: %v", err)
	}
	// Settings round-trip; an export carries users, tokens and invites, and
	// deleting a user takes its tokens along.
	set := account.Settings{PeerLoginExpirationEnabled: true, PeerLoginExpiration: 3600, JWTGroupsEnabled: true, JWTGroupsClaimName: "groups"}
	// A second factor, an upstream provider and a link, which the export
	// carries too.
	totp := store.TOTPFactor{Subject: string(owner.ID), Secret: "sealed-totp", Confirmed: true, Recovery: []string{"h1", "h2"}, LastStep: 7, CreatedAt: now}
	prov := store.IdentityProvider{ID: "idp1", AccountID: a.ID, Type: "oidc", Name: "Corp", Issuer: "https://idp.example.com", ClientID: "cid", ClientSecret: "sealed-secret", CreatedAt: now}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.PutTOTPFactor(ctx, totp); err != nil {
			return err
		}
		if err := tx.In(a.ID).InsertIdentityProvider(ctx, prov); err != nil {
			return err
		}
		return tx.InsertIdPLink(ctx, prov.ID, "upstream-1", owner.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	var dump store.Dump
	err = st.Tx(ctx, func(tx *store.Tx) error {
		in := tx.In(a.ID)
		if err := in.UpdateSettings(ctx, set); err != nil {
			return err
		}
		var err error
		if dump, err = in.Export(ctx); err != nil {
			return err
		}
		return in.DeleteUser(ctx, owner.ID)
	})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(dump.Account.Settings, set) || len(dump.Users) != 1 || len(dump.Tokens) != 1 || len(dump.Invites) != 1 {
		t.Fatalf("export: settings %+v users %d tokens %d invites %d", dump.Account.Settings, len(dump.Users), len(dump.Tokens), len(dump.Invites))
	}
	err = st.Read(ctx, func(tx *store.Tx) error {
		_, err := tx.TokenByHash(ctx, "hash-t1")
		return err
	})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("token after its user was deleted: %v", err)
	}

	// The export carries the users' local logins, and an import brings
	// them back (a move to another store keeps passwords working); a
	// login of someone who is not a user of the dump is refused.
	if len(dump.Credentials) != 1 || dump.Credentials[0].Subject != owner.ID || dump.Credentials[0].PasswordHash != "bcrypt" {
		t.Fatalf("export credentials: %+v", dump.Credentials)
	}
	if len(dump.TOTPFactors) != 1 || !reflect.DeepEqual(dump.TOTPFactors[0], totp) || len(dump.IdentityProviders) != 1 || !reflect.DeepEqual(dump.IdentityProviders[0], prov) ||
		len(dump.IdPLinks) != 1 || dump.IdPLinks[0] != (store.IdPLinkEntry{ProviderID: prov.ID, UpstreamSubject: "upstream-1", UserID: owner.ID}) {
		t.Fatalf("export: totp %+v, providers %+v, links %+v", dump.TOTPFactors, dump.IdentityProviders, dump.IdPLinks)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		if err := tx.DeleteAccount(ctx, a.ID); err != nil {
			return err
		}
		if err := tx.DeleteCredential(ctx, owner.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	stranger := dump
	stranger.Credentials = append([]account.Credential{{Subject: "stranger", Email: "s@example.com", PasswordHash: "x", CreatedAt: now}}, dump.Credentials...)
	strangerTOTP := dump
	strangerTOTP.TOTPFactors = []store.TOTPFactor{{Subject: "stranger", Secret: "x", CreatedAt: now}}
	strangerLink := dump
	strangerLink.IdPLinks = []store.IdPLinkEntry{{ProviderID: prov.ID, UpstreamSubject: "u2", UserID: "stranger"}}
	for name, d := range map[string]store.Dump{"a login": stranger, "a second factor": strangerTOTP, "a provider link": strangerLink} {
		if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Import(ctx, d) }); err == nil {
			t.Fatalf("import of %s that is no user's of the dump succeeded", name)
		}
	}
	if err := st.Tx(ctx, func(tx *store.Tx) error { return tx.Import(ctx, dump) }); err != nil {
		t.Fatalf("import: %v", err)
	}
	err = st.Read(ctx, func(tx *store.Tx) error {
		c, err := tx.CredentialByEmail(ctx, owner.Email)
		if err == nil && (c.Subject != owner.ID || c.PasswordHash != "bcrypt") {
			err = fmt.Errorf("credential %+v", c)
		}
		if err != nil {
			return err
		}
		if f, err := tx.TOTPFactor(ctx, string(owner.ID)); err != nil || !reflect.DeepEqual(f, totp) {
			return fmt.Errorf("totp factor %+v, %v", f, err)
		}
		if p, err := tx.In(a.ID).IdentityProvider(ctx, prov.ID); err != nil || !reflect.DeepEqual(p, prov) {
			return fmt.Errorf("identity provider %+v, %v", p, err)
		}
		if u, err := tx.IdPLink(ctx, prov.ID, "upstream-1"); err != nil || u != owner.ID {
			return fmt.Errorf("link to %q, %v", u, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("credential after import: %v", err)
	}
}
