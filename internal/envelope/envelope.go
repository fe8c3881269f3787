// Package envelope seals and opens the bodies of NetBird EncryptedMessages:
// NaCl crypto_box (Curve25519, XSalsa20, Poly1305) laid out as
// nonce(24) ‖ tag(16) ‖ ciphertext, with protobuf plaintexts. It knows
// nothing about gRPC or about which side is the server.
package envelope

import (
	"crypto/rand"
	"errors"
	"fmt"

	"golang.org/x/crypto/nacl/box"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/key"
)

// NonceSize is the length of the random nonce that prefixes every body.
const NonceSize = 24

// Overhead is the number of bytes a sealed body adds to its plaintext.
const Overhead = NonceSize + box.Overhead

// ErrOpen is returned for a body that is too short, tampered with, or sealed
// for other keys.
var ErrOpen = errors.New("cannot open sealed message")

// Shared is the precomputed shared key of one (local private, remote public)
// pair; computing it once saves the Curve25519 operation on every message.
type Shared struct{ k [32]byte }

// NewShared precomputes the key for messages between priv's owner and pub's owner.
func NewShared(priv key.Private, pub key.Public) *Shared {
	s := &Shared{}
	pk, sk := [32]byte(pub), [32]byte(priv)
	box.Precompute(&s.k, &pk, &sk)
	return s
}

// Seal encrypts plaintext with a fresh random nonce.
func (s *Shared) Seal(plaintext []byte) ([]byte, error) {
	var nonce [NonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return s.SealWithNonce(plaintext, nonce), nil
}

// SealAppend seals plaintext and appends the body (as Seal returns it)
// to dst, so a sender can seal straight into the buffer it writes out.
func (s *Shared) SealAppend(dst, plaintext []byte) ([]byte, error) {
	var nonce [NonceSize]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("nonce: %w", err)
	}
	return box.SealAfterPrecomputation(append(dst, nonce[:]...), plaintext, &nonce, &s.k), nil
}

// SealWithNonce encrypts with a caller-chosen nonce. Only tests with fixed
// vectors should call it: reusing a nonce breaks confidentiality.
func (s *Shared) SealWithNonce(plaintext []byte, nonce [NonceSize]byte) []byte {
	out := make([]byte, NonceSize, NonceSize+box.Overhead+len(plaintext))
	copy(out, nonce[:])
	return box.SealAfterPrecomputation(out, plaintext, &nonce, &s.k)
}

// Open decrypts a body produced by Seal on the other side.
func (s *Shared) Open(body []byte) ([]byte, error) {
	if len(body) < Overhead {
		return nil, fmt.Errorf("%w: body of %d bytes is shorter than %d", ErrOpen, len(body), Overhead)
	}
	var nonce [NonceSize]byte
	copy(nonce[:], body[:NonceSize])
	out, ok := box.OpenAfterPrecomputation(nil, body[NonceSize:], &nonce, &s.k)
	if !ok {
		return nil, fmt.Errorf("%w: authentication failed", ErrOpen)
	}
	return out, nil
}

// SealProto marshals m and seals it.
func (s *Shared) SealProto(m proto.Message) ([]byte, error) {
	b, err := proto.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("marshal %T: %w", m, err)
	}
	return s.Seal(b)
}

// OpenProto opens body and unmarshals it into m.
func (s *Shared) OpenProto(body []byte, m proto.Message) error {
	b, err := s.Open(body)
	if err != nil {
		return err
	}
	if err := proto.Unmarshal(b, m); err != nil {
		return fmt.Errorf("%w: malformed %T: %w", ErrOpen, m, err)
	}
	return nil
}

// Seal is a one-shot helper: seal plaintext from priv's owner to pub's owner.
func Seal(plaintext []byte, pub key.Public, priv key.Private) ([]byte, error) {
	return NewShared(priv, pub).Seal(plaintext)
}

// Open is a one-shot helper: open a body that pub's owner sealed for priv's owner.
func Open(body []byte, pub key.Public, priv key.Private) ([]byte, error) {
	return NewShared(priv, pub).Open(body)
}
