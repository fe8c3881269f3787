// Package tenant creates and finds accounts. A self-hosted install starts
// with one default account, created on first use by whichever process (the
// server or the admin command) gets there first.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/ipam"
	"github.com/wiremesh/wiremesh/management/store"
)

// Default returns the oldest account, creating it if there is none.
func Default(ctx context.Context, st *store.Store, now time.Time) (account.Account, error) {
	var acc account.Account
	err := st.Tx(ctx, func(tx *store.Tx) error {
		accs, err := tx.Accounts(ctx)
		if err != nil {
			return err
		}
		if len(accs) > 0 {
			acc = accs[0]
			return nil
		}
		acc, err = Create(ctx, tx, now)
		return err
	})
	if errors.Is(err, store.ErrConflict) {
		return Default(ctx, st, now)
	}
	if err != nil {
		return account.Account{}, fmt.Errorf("default account: %w", err)
	}
	return acc, nil
}

// Create makes a new account inside tx, with the built-in All group and the
// Default All-to-All policy, which an admin can turn off, and a random
// IPv6 overlay /64 enabled for the All group.
func Create(ctx context.Context, tx *store.Tx, now time.Time) (account.Account, error) {
	network, err := ipam.RandomNetwork()
	if err != nil {
		return account.Account{}, err
	}
	network6, err := ipam.RandomNetworkV6()
	if err != nil {
		return account.Account{}, err
	}
	acc := account.Account{ID: account.ID(uuid.NewString()), Domain: account.DefaultDomain, Network: network, NetworkV6: network6,
		CreatedAt: now.UTC(), Settings: account.DefaultSettings()}
	all, pol := store.DefaultAccess(acc.ID)
	// As NetBird: a new account's peers all get IPv6 overlay addresses
	// (those whose agents support it).
	acc.Settings.IPv6EnabledGroups = []account.GroupID{all.ID}
	if err := tx.InsertAccount(ctx, acc); err != nil {
		return account.Account{}, err
	}
	if err := tx.In(acc.ID).PutGroup(ctx, all); err != nil {
		return account.Account{}, err
	}
	return acc, tx.In(acc.ID).PutPolicy(ctx, pol)
}
