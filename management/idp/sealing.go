package idp

import (
	"context"
	"fmt"
	"math"

	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
)

// SealSecrets is the start-up migration of upstream providers' client
// secrets stored in plain text (before they were sealed): each is sealed
// with box, bound to its provider. Idempotent: a sealed value carries
// secretbox.Prefix and is left alone, so a second run changes nothing.
// It returns how many it sealed.
func SealSecrets(ctx context.Context, st *store.Store, box *secretbox.Box) (int, error) {
	n := 0
	err := st.Tx(ctx, func(tx *store.Tx) error {
		n = 0
		list, err := tx.AllIdentityProviders(ctx, math.MaxInt32)
		if err != nil {
			return err
		}
		for _, p := range list {
			if p.ClientSecret == "" || secretbox.Sealed(p.ClientSecret) {
				continue
			}
			v, err := box.Seal(p.ClientSecret, p.ID)
			if err != nil {
				return err
			}
			if err := tx.SetIdentityProviderSecret(ctx, p.ID, v); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("sealing identity providers' client secrets: %w", err)
	}
	return n, nil
}

// DropSealedSecrets empties every sealed client secret (their key was
// lost: see secretbox.Verify); an admin enters them again with PUT
// /api/identity-providers/{id}.
func DropSealedSecrets(ctx context.Context, tx *store.Tx) error {
	list, err := tx.AllIdentityProviders(ctx, math.MaxInt32)
	if err != nil {
		return err
	}
	for _, p := range list {
		if secretbox.Sealed(p.ClientSecret) {
			if err := tx.SetIdentityProviderSecret(ctx, p.ID, ""); err != nil {
				return err
			}
		}
	}
	return nil
}
