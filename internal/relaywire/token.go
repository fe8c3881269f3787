package relaywire

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"time"
)

// AlgoHMACSHA256 is the only token algorithm.
const AlgoHMACSHA256 = 1

const sigSize = sha256.Size

// minPayload is the shortest accepted payload (10 decimal digits).
const minPayload = 10

// Token errors.
var (
	ErrTokenExpired   = errors.New("expired token")
	ErrTokenSignature = errors.New("invalid signature")
	ErrTokenMalformed = errors.New("malformed token")
)

// hmacKey is SHA-256 of the secret: both management and the relay hash the
// configured secret before keying the HMAC with it.
func hmacKey(secret string) []byte {
	k := sha256.Sum256([]byte(secret))
	return k[:]
}

// Credentials are what management hands out in RelayConfig.
type Credentials struct {
	Payload   string    // decimal unix time at which the token expires
	Signature string    // std base64 of the HMAC
	Expires   time.Time // the same time, parsed
}

// Issue signs a token that expires at exp.
func Issue(secret string, exp time.Time) Credentials {
	payload := strconv.FormatInt(exp.Unix(), 10)
	m := hmac.New(sha256.New, hmacKey(secret))
	m.Write([]byte(payload))
	return Credentials{Payload: payload, Signature: base64.StdEncoding.EncodeToString(m.Sum(nil)), Expires: time.Unix(exp.Unix(), 0)}
}

// Binary is the token as the auth message carries it: algorithm, raw
// signature, payload.
func (c Credentials) Binary() ([]byte, error) {
	sig, err := base64.StdEncoding.DecodeString(c.Signature)
	if err != nil || len(sig) != sigSize {
		return nil, fmt.Errorf("%w: the signature is not a base64 HMAC-SHA256", ErrTokenMalformed)
	}
	b := make([]byte, 0, 1+sigSize+len(c.Payload))
	b = append(b, AlgoHMACSHA256)
	b = append(b, sig...)
	return append(b, c.Payload...), nil
}

// Validate checks a binary token against the secret at now. The expiry
// second itself is still valid.
func Validate(secret string, token []byte, now time.Time) error {
	if len(token) < 1 {
		return fmt.Errorf("%w: empty", ErrTokenMalformed)
	}
	if token[0] != AlgoHMACSHA256 {
		return fmt.Errorf("%w: unsupported auth algorithm %d", ErrTokenMalformed, token[0])
	}
	if len(token) < 1+sigSize+minPayload {
		return fmt.Errorf("%w: too short", ErrTokenMalformed)
	}
	sig, payload := token[1:1+sigSize], token[1+sigSize:]
	m := hmac.New(sha256.New, hmacKey(secret))
	m.Write(payload)
	if !hmac.Equal(m.Sum(nil), sig) {
		return ErrTokenSignature
	}
	exp, err := strconv.ParseInt(string(payload), 10, 64)
	if err != nil {
		return fmt.Errorf("%w: invalid payload", ErrTokenMalformed)
	}
	if now.Unix() > exp {
		return ErrTokenExpired
	}
	return nil
}
