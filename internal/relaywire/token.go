package relaywire

import (
	"bytes"
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

// idPrefix starts every peer ID; a bound token carries only the hash after it.
const idPrefix = "sha-"

// boundSep separates the expiry from the peer binding in a bound payload.
const boundSep = '.'

// Token errors.
var (
	ErrTokenExpired   = errors.New("expired token")
	ErrTokenSignature = errors.New("invalid signature")
	ErrTokenMalformed = errors.New("malformed token")
	// ErrTokenOtherPeer is a genuine token bound to another peer ID.
	ErrTokenOtherPeer = errors.New("token bound to another peer")
	// ErrTokenUnbound is a genuine token bound to no peer, where the
	// verifier requires a binding.
	ErrTokenUnbound = errors.New("token not bound to a peer")
)

// hmacKey is SHA-256 of the secret: both management and the relay hash the
// configured secret before keying the HMAC with it.
func hmacKey(secret string) []byte {
	k := sha256.Sum256([]byte(secret))
	return k[:]
}

// Credentials are what management hands out in RelayConfig.
type Credentials struct {
	// Payload is the signed text: the decimal unix time at which the token
	// expires, then for a bound token "." and the unpadded base64url of the
	// peer ID's hash. Clients pass it through as opaque bytes.
	Payload   string
	Signature string    // std base64 of the HMAC
	Expires   time.Time // the expiry, parsed
}

// Issue signs a token that expires at exp and is bound to no peer: any
// holder can claim any peer ID with it (the reference's format).
func Issue(secret string, exp time.Time) Credentials {
	return sign(secret, strconv.FormatInt(exp.Unix(), 10), exp)
}

// IssueFor signs a token that expires at exp and is valid only for the
// peer id. The payload stays within what the official client carries (an
// opaque string of at most 137 bytes, here 54).
func IssueFor(secret string, exp time.Time, id PeerID) Credentials {
	payload := strconv.FormatInt(exp.Unix(), 10) + string(boundSep) + base64.RawURLEncoding.EncodeToString(id[len(idPrefix):])
	return sign(secret, payload, exp)
}

func sign(secret, payload string, exp time.Time) Credentials {
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

// Claims are what a genuine token says.
type Claims struct {
	Expires time.Time
	Bound   bool   // the token names a peer
	Peer    PeerID // that peer, when Bound
}

// For checks that the claims allow peer id to authenticate: a bound token
// only for its own peer; an unbound one only where allowUnbound.
func (c Claims) For(id PeerID, allowUnbound bool) error {
	switch {
	case c.Bound && c.Peer != id:
		return ErrTokenOtherPeer
	case !c.Bound && !allowUnbound:
		return ErrTokenUnbound
	}
	return nil
}

// Check verifies a binary token against the secret at now and returns its
// claims. The expiry second itself is still valid. It does not check whom
// the token is for (see Claims.For).
func Check(secret string, token []byte, now time.Time) (Claims, error) {
	if len(token) < 1 {
		return Claims{}, fmt.Errorf("%w: empty", ErrTokenMalformed)
	}
	if token[0] != AlgoHMACSHA256 {
		return Claims{}, fmt.Errorf("%w: unsupported auth algorithm %d", ErrTokenMalformed, token[0])
	}
	if len(token) < 1+sigSize+minPayload {
		return Claims{}, fmt.Errorf("%w: too short", ErrTokenMalformed)
	}
	sig, payload := token[1:1+sigSize], token[1+sigSize:]
	m := hmac.New(sha256.New, hmacKey(secret))
	m.Write(payload)
	if !hmac.Equal(m.Sum(nil), sig) {
		return Claims{}, ErrTokenSignature
	}
	var c Claims
	digits := payload
	if i := bytes.IndexByte(payload, boundSep); i >= 0 {
		digits = payload[:i]
		h, err := base64.RawURLEncoding.DecodeString(string(payload[i+1:]))
		if err != nil || len(h) != PeerIDSize-len(idPrefix) {
			return Claims{}, fmt.Errorf("%w: invalid peer binding", ErrTokenMalformed)
		}
		c.Bound = true
		copy(c.Peer[:], idPrefix)
		copy(c.Peer[len(idPrefix):], h)
	}
	exp, err := strconv.ParseInt(string(digits), 10, 64)
	if err != nil {
		return Claims{}, fmt.Errorf("%w: invalid payload", ErrTokenMalformed)
	}
	c.Expires = time.Unix(exp, 0)
	if now.Unix() > exp {
		return Claims{}, ErrTokenExpired
	}
	return c, nil
}

// Validate checks that a binary token is genuine and unexpired, bound or
// not; it does not check whom the token is for (see Check and Claims.For).
func Validate(secret string, token []byte, now time.Time) error {
	_, err := Check(secret, token, now)
	return err
}
