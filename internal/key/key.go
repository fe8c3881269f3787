// Package key provides typed WireGuard Curve25519 keys as the wire protocol
// carries them: 32 raw bytes, shown as 44-character standard base64. It does
// not perform any encryption; see package envelope for that.
package key

import (
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"

	"golang.org/x/crypto/curve25519"
)

// Size is the length of a raw key.
const Size = 32

// ErrInvalid is returned for a key that is not 32 bytes of standard base64.
var ErrInvalid = errors.New("invalid WireGuard key")

// Public is a WireGuard public key.
type Public [Size]byte

// Private is a WireGuard private key (clamped Curve25519 scalar).
type Private [Size]byte

// ParsePublic parses the base64 form of a public key.
func ParsePublic(s string) (Public, error) {
	var k Public
	if err := decode(s, k[:]); err != nil {
		return Public{}, err
	}
	return k, nil
}

// ParsePrivate parses the base64 form of a private key.
func ParsePrivate(s string) (Private, error) {
	var k Private
	if err := decode(s, k[:]); err != nil {
		return Private{}, err
	}
	return k, nil
}

func decode(s string, dst []byte) error {
	if len(s) != base64.StdEncoding.EncodedLen(Size) {
		return fmt.Errorf("%w: want %d base64 characters, got %d", ErrInvalid, base64.StdEncoding.EncodedLen(Size), len(s))
	}
	// 44 characters without padding decode to 33 bytes: decode into room
	// for what the text can hold (Decode panics when dst is too short),
	// then insist on exactly Size.
	buf := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
	n, err := base64.StdEncoding.Strict().Decode(buf, []byte(s))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if n != Size {
		return fmt.Errorf("%w: decoded %d bytes", ErrInvalid, n)
	}
	copy(dst, buf[:n])
	return nil
}

// NewPrivate generates a fresh private key.
func NewPrivate() (Private, error) {
	var k Private
	if _, err := rand.Read(k[:]); err != nil {
		return Private{}, fmt.Errorf("generate key: %w", err)
	}
	// Clamp as WireGuard does so that the stored form is canonical.
	k[0] &= 248
	k[31] = (k[31] & 127) | 64
	return k, nil
}

// Public derives the public key.
func (k Private) Public() Public {
	var p Public
	out, err := curve25519.X25519(k[:], curve25519.Basepoint)
	if err != nil {
		// X25519 with the base point only fails for an all-zero result, which a
		// clamped scalar cannot produce.
		panic(fmt.Sprintf("key: derive public key: %v", err))
	}
	copy(p[:], out)
	return p
}

// String returns the base64 form of the public key.
func (k Public) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// String returns the base64 form of the private key. Never log it.
func (k Private) String() string { return base64.StdEncoding.EncodeToString(k[:]) }

// IsZero reports whether the key is unset.
func (k Public) IsZero() bool { return k == Public{} }

// MarshalText implements encoding.TextMarshaler.
func (k Public) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (k *Public) UnmarshalText(b []byte) error {
	p, err := ParsePublic(string(b))
	if err != nil {
		return err
	}
	*k = p
	return nil
}
