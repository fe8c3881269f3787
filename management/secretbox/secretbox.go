// Package secretbox seals the secrets management keeps in its store (the
// client secrets of accounts' upstream identity providers) with a key the
// store does not hold: XChaCha20-Poly1305 under a 32-byte key given by the
// operator (--store-encryption-key) or kept in a file beside the SQLite
// store (created 0600 on first start). A sealed value names its format
// ("sealed:v1:") and is bound to the row it belongs to (associated data),
// so it cannot be moved to another row. A check value in the store's
// settings makes an instance holding another key refuse to start instead
// of failing later. It does not rotate keys or seal anything by itself:
// the packages that own a secret seal and open it.
package secretbox

import (
	"context"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/crypto/chacha20poly1305"

	"github.com/wiremesh/wiremesh/management/store"
)

// Prefix starts every sealed value; a stored value without it is legacy
// plain text (sealed by the start-up migration).
const Prefix = "sealed:v1:"

// KeyFile is the key's file name in the data directory.
const KeyFile = "store-encryption.key"

// Errors.
var (
	// ErrWrongKey: the store's secrets were sealed with another key.
	ErrWrongKey = errors.New("the store's secrets were sealed with another key")
	// ErrCorrupt: a sealed value that does not open.
	ErrCorrupt = errors.New("sealed value does not open with this key")
)

// Box seals and opens secrets; safe for concurrent use.
type Box struct{ aead cipher.AEAD }

// New makes a box of a 32-byte key.
func New(key []byte) (*Box, error) {
	a, err := chacha20poly1305.NewX(key)
	if err != nil {
		return nil, fmt.Errorf("store encryption key: %w", err)
	}
	return &Box{aead: a}, nil
}

// Sealed reports whether v is a sealed value.
func Sealed(v string) bool { return strings.HasPrefix(v, Prefix) }

// Seal encrypts plain, bound to aad (the row it is stored in).
func (b *Box) Seal(plain, aad string) (string, error) {
	nonce := make([]byte, chacha20poly1305.NonceSizeX, chacha20poly1305.NonceSizeX+len(plain)+b.aead.Overhead())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := b.aead.Seal(nonce, nonce, []byte(plain), []byte(aad))
	return Prefix + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a sealed value bound to aad.
func (b *Box) Open(v, aad string) (string, error) {
	if !Sealed(v) {
		return "", fmt.Errorf("%w: not a sealed value", ErrCorrupt)
	}
	raw, err := base64.RawStdEncoding.DecodeString(strings.TrimPrefix(v, Prefix))
	if err != nil || len(raw) < chacha20poly1305.NonceSizeX+b.aead.Overhead() {
		return "", ErrCorrupt
	}
	plain, err := b.aead.Open(nil, raw[:chacha20poly1305.NonceSizeX], raw[chacha20poly1305.NonceSizeX:], []byte(aad))
	if err != nil {
		return "", ErrCorrupt
	}
	return string(plain), nil
}

// ParseKey reads a key as the operator writes it: 32 bytes in base64
// (standard or URL alphabet, padded or not) or 64 hex digits (what
// `openssl rand -base64 32` or `-hex 32` print).
func ParseKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	if b, err := hex.DecodeString(s); err == nil && len(b) == chacha20poly1305.KeySize {
		return b, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil && len(b) == chacha20poly1305.KeySize {
			return b, nil
		}
	}
	return nil, errors.New("store encryption key: want 32 bytes as base64 or 64 hex digits (openssl rand -base64 32)")
}

// LoadKeyFile reads the key in dir's KeyFile, creating it (0600, a new
// random key) when there is none.
func LoadKeyFile(dir string) ([]byte, error) {
	path := filepath.Join(dir, KeyFile)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			k, err := ParseKey(string(b))
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			return k, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("store encryption key: %w", err)
		}
		k := make([]byte, chacha20poly1305.KeySize)
		if _, err := rand.Read(k); err != nil {
			return nil, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another process made it first: read that one
		}
		if err != nil {
			return nil, fmt.Errorf("store encryption key: %w", err)
		}
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(k) + "\n")
		if cerr := f.Close(); werr == nil {
			werr = cerr
		}
		if werr != nil {
			_ = os.Remove(path)
			return nil, fmt.Errorf("store encryption key: %w", werr)
		}
		return k, nil
	}
}

// checkSetting holds a value sealed with the store's key.
const (
	checkSetting = "store_key_check"
	checkPlain   = "wiremesh store encryption key check"
)

// Verify checks that b's key is the one the store's secrets are sealed
// with, recording it on first use. With forget, a store sealed with a lost
// key adopts b's key instead and reports true: the caller then drops the
// secrets it can no longer open (in the same transaction, tx).
func Verify(ctx context.Context, st *store.Store, b *Box, forget bool, drop func(ctx context.Context, tx *store.Tx) error) (forgot bool, err error) {
	for range 3 {
		forgot, err = b.verify(ctx, st, forget, drop)
		if !errors.Is(err, store.ErrConflict) {
			break // a conflict: another instance recorded its key first; check against it
		}
	}
	return forgot, err
}

func (b *Box) verify(ctx context.Context, st *store.Store, forget bool, drop func(ctx context.Context, tx *store.Tx) error) (forgot bool, err error) {
	err = st.Tx(ctx, func(tx *store.Tx) error {
		forgot = false
		v, err := tx.Setting(ctx, checkSetting)
		switch {
		case errors.Is(err, store.ErrNotFound):
			return b.record(ctx, tx, false)
		case err != nil:
			return err
		}
		if p, err := b.Open(v, checkSetting); err == nil && p == checkPlain {
			return nil
		}
		if !forget {
			return ErrWrongKey
		}
		forgot = true
		if err := drop(ctx, tx); err != nil {
			return err
		}
		return b.record(ctx, tx, true)
	})
	if err != nil {
		return false, fmt.Errorf("store encryption key: %w", err)
	}
	return forgot, nil
}

func (b *Box) record(ctx context.Context, tx *store.Tx, replace bool) error {
	v, err := b.Seal(checkPlain, checkSetting)
	if err != nil {
		return err
	}
	if replace {
		return tx.ReplaceSetting(ctx, checkSetting, v)
	}
	return tx.InsertSetting(ctx, checkSetting, v)
}
