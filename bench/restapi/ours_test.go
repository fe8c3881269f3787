package restapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/auth"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
)

// seedOurs writes the dataset into a wiremesh store through the store API
// (one transaction; the default All-to-All policy switched off so that the
// dataset's policies decide who reaches whom) and returns the owner's
// personal access token.
func seedOurs(t *testing.T, cfg store.Config, d dataset) string {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	acc, err := tenant.Default(ctx, st, d.base)
	if err != nil {
		t.Fatal(err)
	}
	plain, hash, err := auth.NewPAT()
	if err != nil {
		t.Fatal(err)
	}
	err = st.Tx(ctx, func(tx *store.Tx) error {
		at := tx.In(acc.ID)
		if err := seedOursUsers(ctx, at, d, hash); err != nil {
			return err
		}
		keys := make([]account.SetupKeyID, d.setupKeys)
		for k := range d.setupKeys {
			sk, _, err := setupkey.New(acc.ID, setupkey.Options{Name: fmt.Sprintf("key-%d", k), Reusable: k%2 == 0, AutoGroups: []string{d.groupID(k % d.groups)}}, d.base)
			if err != nil {
				return err
			}
			sk.ID = account.SetupKeyID(d.keyID(k))
			keys[k] = sk.ID
			if err := at.InsertSetupKey(ctx, sk); err != nil {
				return fmt.Errorf("setup key %d: %w", k, err)
			}
		}
		for i := range d.peers {
			p := account.Peer{ID: account.PeerID(d.peerID(i)), AccountID: acc.ID, Key: d.keys[i], IP: d.peerIP(acc.Network, i), Name: d.hostname(i), DNSLabel: d.hostname(i),
				Meta:      account.Meta{Hostname: d.hostname(i), GoOS: "linux", Kernel: "Linux", KernelVersion: "6.1.0", OS: "Debian GNU/Linux", OSVersion: "12", NetbirdVersion: "0.77.1", ConnectionIP: "192.0.2.1"},
				CreatedAt: d.base, LastLogin: d.base, LastSeen: d.base.Add(time.Duration(i) * time.Second)}
			if u := d.peerUser(i); u >= 0 {
				p.UserID = account.UserID(d.userID(u))
			} else {
				p.SetupKeyID = keys[i%d.setupKeys]
			}
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
		_, def := store.DefaultAccess(acc.ID)
		def.Enabled = false
		if err := at.PutPolicy(ctx, def); err != nil {
			return err
		}
		for j := range d.policies {
			src, dst, bidi := d.policy(j)
			p := account.Policy{ID: account.PolicyID(d.policyID(j)), AccountID: acc.ID, Name: fmt.Sprintf("policy-%04d", j), Enabled: true,
				Rules: []account.Rule{{ID: d.ruleID(j), Name: fmt.Sprintf("rule-%04d", j), Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoTCP,
					Bidirectional: bidi, Ports: []uint16{22}, Sources: []account.GroupID{account.GroupID(d.groupID(src))}, Destinations: []account.GroupID{account.GroupID(d.groupID(dst))}}}}
			if err := at.PutPolicy(ctx, p); err != nil {
				return fmt.Errorf("policy %d: %w", j, err)
			}
		}
		for e := range d.events {
			ev := account.Event{AccountID: acc.ID, At: d.base.Add(time.Duration(e) * time.Second), Activity: "peer.setupkey.add", Initiator: d.ownerID(), Target: d.peerID(e % d.peers),
				Meta: map[string]string{"fqdn": d.hostname(e%d.peers) + "." + account.DefaultDomain, "setup_key_name": "key-0"}}
			if _, err := at.InsertEvent(ctx, ev); err != nil {
				return fmt.Errorf("event %d: %w", e, err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("seed %s store: %v", cfg.Engine, err)
	}
	return plain
}

// seedOursUsers adds the users (0 the owner, 1-9 admins, 10-19 service
// users, the rest regular users) and the owner's token.
func seedOursUsers(ctx context.Context, at *store.AccountTx, d dataset, tokenHash string) error {
	for u := range d.users {
		role, service := account.RoleUser, false
		switch {
		case u == 0:
			role = account.RoleOwner
		case u < 10:
			role = account.RoleAdmin
		case u < 20:
			service = true
		}
		usr := account.User{ID: account.UserID(d.userID(u)), AccountID: at.ID(), Email: fmt.Sprintf("user%d@example.com", u), Name: fmt.Sprintf("User %d", u),
			Role: role, ServiceUser: service, AutoGroups: []string{}, Issued: "api", CreatedAt: d.base}
		if service {
			usr.Email = ""
		}
		if err := at.InsertUser(ctx, usr); err != nil {
			return fmt.Errorf("user %d: %w", u, err)
		}
	}
	return at.InsertToken(ctx, account.Token{ID: "bench-token", AccountID: at.ID(), UserID: account.UserID(d.ownerID()), Name: "bench", Hash: tokenHash,
		ExpiresAt: time.Now().AddDate(1, 0, 0), CreatedBy: account.UserID(d.ownerID()), CreatedAt: d.base})
}
