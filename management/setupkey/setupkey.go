// Package setupkey creates setup keys and decides whether one may register a
// peer. A key's secret is a random UUID shown once; only its hash is kept,
// computed as the reference does (base64(sha256(UPPER(key)))) so matching is
// case-insensitive. It does not store anything itself.
package setupkey

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/wiremesh/wiremesh/management/account"
)

// DefaultExpiry is how long a key is valid unless told otherwise.
const DefaultExpiry = 30 * 24 * time.Hour

// MaxExpiry bounds a key's lifetime (a key may also never expire).
const MaxExpiry = 365 * 24 * time.Hour

// Reasons a key is refused. They wrap ErrInvalid.
var (
	ErrInvalid   = errors.New("setup key is invalid")
	ErrMalformed = fmt.Errorf("%w: not a UUID", ErrInvalid)
	ErrUnknown   = fmt.Errorf("%w: unknown key", ErrInvalid)
	ErrExpired   = fmt.Errorf("%w: expired", ErrInvalid)
	ErrRevoked   = fmt.Errorf("%w: revoked", ErrInvalid)
	ErrExhausted = fmt.Errorf("%w: usage limit reached", ErrInvalid)
)

// Options describe a new key.
type Options struct {
	Name       string
	Reusable   bool
	UsageLimit int           // reusable keys only; 0 = unlimited
	Expiry     time.Duration // 0 = DefaultExpiry; negative = never expires
	AutoGroups []string
	Ephemeral  bool
}

// New creates a key record and returns it with its secret, which the caller
// shows once and never stores.
func New(acc account.ID, opts Options, now time.Time) (account.SetupKey, string, error) {
	if opts.UsageLimit < 0 {
		return account.SetupKey{}, "", fmt.Errorf("usage limit must not be negative")
	}
	if opts.Expiry > MaxExpiry {
		return account.SetupKey{}, "", fmt.Errorf("expiry %v is longer than %v", opts.Expiry, MaxExpiry)
	}
	secret := strings.ToUpper(uuid.NewString())
	limit := opts.UsageLimit
	if !opts.Reusable {
		limit = 1
	}
	var expires time.Time
	switch {
	case opts.Expiry == 0:
		expires = now.Add(DefaultExpiry)
	case opts.Expiry > 0:
		expires = now.Add(opts.Expiry)
	}
	name := opts.Name
	if name == "" {
		name = "setup key"
	}
	k := account.SetupKey{
		ID:         account.SetupKeyID(uuid.NewString()),
		AccountID:  acc,
		Name:       name,
		Hash:       Hash(secret),
		Prefix:     secret[:8],
		Reusable:   opts.Reusable,
		UsageLimit: limit,
		ExpiresAt:  expires,
		AutoGroups: opts.AutoGroups,
		Ephemeral:  opts.Ephemeral,
		CreatedAt:  now,
	}
	return k, secret, nil
}

// Hash returns the stored form of a secret. The secret is canonicalised
// first, so upper- and lower-case forms of one UUID hash alike.
func Hash(secret string) string {
	sum := sha256.Sum256([]byte(strings.ToUpper(strings.TrimSpace(secret))))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// Parse checks that a presented secret is a UUID and returns its hash.
func Parse(secret string) (string, error) {
	u, err := uuid.Parse(strings.TrimSpace(secret))
	if err != nil {
		return "", ErrMalformed
	}
	return Hash(u.String()), nil
}

// Check reports why k cannot register a peer at now, or nil if it can.
func Check(k account.SetupKey, now time.Time) error {
	switch {
	case k.Revoked:
		return ErrRevoked
	case !k.ExpiresAt.IsZero() && !now.Before(k.ExpiresAt):
		return ErrExpired
	case k.UsageLimit > 0 && k.UsedTimes >= k.UsageLimit:
		return ErrExhausted
	}
	return nil
}

// State is a short human word for the key's status.
func State(k account.SetupKey, now time.Time) string {
	switch Check(k, now) {
	case nil:
		return "valid"
	case ErrRevoked:
		return "revoked"
	case ErrExpired:
		return "expired"
	default:
		return "exhausted"
	}
}
