package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/wiremesh/wiremesh/management/idp"
	"github.com/wiremesh/wiremesh/management/secretbox"
	"github.com/wiremesh/wiremesh/management/store"
)

// openSecrets loads the key that seals the store's secrets (the
// operator's, or the key file in the data directory), checks it against
// the store and seals what an older version stored in plain text.
func openSecrets(ctx context.Context, st *store.Store, c store.Config, log *slog.Logger) (*secretbox.Box, error) {
	var (
		key []byte
		err error
	)
	switch {
	case c.SecretKey != "":
		key, err = secretbox.ParseKey(c.SecretKey)
	case c.DataDir != "":
		key, err = secretbox.LoadKeyFile(c.DataDir)
	default:
		err = errors.New("store encryption key: none given and no data directory to keep one in (--store-encryption-key)")
	}
	if err != nil {
		return nil, err
	}
	box, err := secretbox.New(key)
	if err != nil {
		return nil, err
	}
	forgot, err := secretbox.Verify(ctx, st, box, c.ForgetLostSecretKey, idp.DropSealedSecrets)
	if errors.Is(err, secretbox.ErrWrongKey) {
		return nil, fmt.Errorf("%w: give every instance the key the store was first sealed with (--store-encryption-key[-file], or the %s file of the first instance's --datadir); if it is lost, start once with --store-encryption-key-lost, which drops the identity providers' client secrets (admins enter them again)", err, secretbox.KeyFile)
	}
	if err != nil {
		return nil, err
	}
	if forgot && log != nil {
		log.Warn("store encryption key replaced: the upstream identity providers' client secrets were dropped; enter them again (PUT /api/identity-providers/{id})")
	}
	n, err := idp.SealSecrets(ctx, st, box)
	if err != nil {
		return nil, err
	}
	if n > 0 && log != nil {
		log.Info("sealed identity providers' client secrets stored in plain text", "count", n)
	}
	return box, nil
}
