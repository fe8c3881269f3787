package auth

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash/crc32"
	"math/big"
	"strings"
)

// Personal access tokens look like the reference's: "nbp_", 30 random
// base62 characters and a 6-character base62 checksum of them, 40 in all.
// The checksum lets a malformed or mistyped token be refused without a
// database lookup; only a SHA-256 hash of the whole token is stored.
const (
	PATPrefix    = "nbp_"
	patSecretLen = 30
	patSumLen    = 6
	patLen       = len(PATPrefix) + patSecretLen + patSumLen
)

const base62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// ErrMalformedPAT is a string that cannot be a personal access token.
var ErrMalformedPAT = errors.New("malformed personal access token")

// NewPAT returns a new token and the hash to store.
func NewPAT() (plain, hash string, err error) {
	var b strings.Builder
	max := big.NewInt(int64(len(base62)))
	for range patSecretLen {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", "", err
		}
		b.WriteByte(base62[n.Int64()])
	}
	secret := b.String()
	plain = PATPrefix + secret + checksum(secret)
	return plain, HashSecret(plain), nil
}

func checksum(secret string) string {
	n := crc32.ChecksumIEEE([]byte(secret))
	out := make([]byte, patSumLen)
	for i := patSumLen - 1; i >= 0; i-- {
		out[i] = base62[n%62]
		n /= 62
	}
	return string(out)
}

// ParsePAT checks a token's form and checksum and returns its hash.
func ParsePAT(s string) (string, error) {
	if len(s) != patLen || !strings.HasPrefix(s, PATPrefix) {
		return "", ErrMalformedPAT
	}
	body := s[len(PATPrefix):]
	for i := 0; i < len(body); i++ {
		if strings.IndexByte(base62, body[i]) < 0 {
			return "", ErrMalformedPAT
		}
	}
	if checksum(body[:patSecretLen]) != body[patSecretLen:] {
		return "", ErrMalformedPAT
	}
	return HashSecret(s), nil
}

// HashSecret is how token secrets (PATs, invite tokens) are stored.
func HashSecret(s string) string {
	sum := sha256.Sum256([]byte(s))
	return base64.StdEncoding.EncodeToString(sum[:])
}

// NewSecret returns a random URL-safe secret with a prefix (invite tokens).
func NewSecret(prefix string) (string, error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return prefix + base64.RawURLEncoding.EncodeToString(b), nil
}
