package sshserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

// The provider's keys are fetched by the agent on behalf of anyone who can
// reach its SSH port, so the fetching is bounded: a token signed with a
// key the agent already has never causes a fetch (a forged signature is
// simply refused), an unknown key ID causes at most one fetch per
// KeyRefetchInterval, and the response is capped in size and time.

// KeyRefetchInterval is the least time between two fetches of the
// provider's keys (a provider that rotates its keys publishes the new one
// well before signing with it, so a minute's wait is rare and short).
const KeyRefetchInterval = time.Minute

// maxJWKSBytes caps the provider's key document (real ones are a few KiB).
const maxJWKSBytes = 1 << 20

// jwksTimeout bounds one fetch when the caller's client has no timeout.
const jwksTimeout = 10 * time.Second

// ErrUnknownSigningKey: the token names a key the provider did not publish
// (at the last fetch, which was too recent to fetch again).
var ErrUnknownSigningKey = errors.New("token signed with a key the provider does not publish")

// remoteKeys is the provider's key set (its JWKS URL), fetched at first
// use and again only for an unknown key ID, at most once per interval.
type remoteKeys struct {
	url      string
	hc       *http.Client
	now      func() time.Time
	interval time.Duration

	// mu is held across a fetch so that concurrent logins with an unknown
	// key wait for the one fetch instead of starting their own.
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	fetched bool      // a fetch was tried
	last    time.Time // when the last fetch was tried (success or not)
}

func newRemoteKeys(url string, hc *http.Client, now func() time.Time) *remoteKeys {
	if hc == nil {
		hc = &http.Client{Timeout: jwksTimeout}
	}
	return &remoteKeys{url: url, hc: hc, now: now, interval: KeyRefetchInterval}
}

// joseAlgs are the signature algorithms a token may use (signingAlgs as
// go-jose names them).
var joseAlgs = []jose.SignatureAlgorithm{jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512,
	jose.PS256, jose.PS384, jose.PS512, jose.EdDSA}

// VerifySignature implements oidc.KeySet: it returns the token's payload
// if one of the provider's keys signed it.
func (r *remoteKeys) VerifySignature(ctx context.Context, token string) ([]byte, error) {
	jws, err := jose.ParseSigned(token, joseAlgs)
	if err != nil {
		return nil, fmt.Errorf("malformed token: %w", err)
	}
	if len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("token has %d signatures, want 1", len(jws.Signatures))
	}
	kid := jws.Signatures[0].Header.KeyID
	keys, err := r.candidates(ctx, kid)
	if err != nil {
		return nil, err
	}
	for _, k := range keys {
		if payload, err := jws.Verify(k); err == nil {
			return payload, nil
		}
	}
	return nil, errors.New("failed to verify the token's signature with the provider's keys")
}

// candidates returns the keys that may have signed a token naming kid,
// fetching the provider's keys if there are none yet or kid is unknown
// and the last fetch is at least an interval old.
func (r *remoteKeys) candidates(ctx context.Context, kid string) ([]jose.JSONWebKey, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if got := matching(r.keys, kid); len(got) > 0 {
		return got, nil
	}
	if r.fetched && r.now().Sub(r.last) < r.interval {
		return nil, fmt.Errorf("%w (key ID %q; the keys were fetched %v ago, next fetch allowed after %v)",
			ErrUnknownSigningKey, kid, r.now().Sub(r.last).Round(time.Second), r.interval)
	}
	r.fetched, r.last = true, r.now()
	keys, err := r.fetch(ctx)
	if err != nil {
		return nil, fmt.Errorf("fetching the provider's keys (jwtConfig.keysLocation %s): %w", r.url, err)
	}
	r.keys = keys
	if got := matching(r.keys, kid); len(got) > 0 {
		return got, nil
	}
	return nil, fmt.Errorf("%w (key ID %q)", ErrUnknownSigningKey, kid)
}

// matching is the signing keys a token naming kid may use: the keys with
// that ID, or every key when the token names none.
func matching(keys []jose.JSONWebKey, kid string) []jose.JSONWebKey {
	var out []jose.JSONWebKey
	for _, k := range keys {
		if k.Use == "enc" {
			continue
		}
		if kid == "" || k.KeyID == kid {
			out = append(out, k)
		}
	}
	return out
}

func (r *remoteKeys) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	ctx, cancel := context.WithTimeout(ctx, jwksTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, fmt.Errorf("request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("get: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("HTTP status %s", resp.Status)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("key document larger than %d bytes", maxJWKSBytes)
	}
	return parseJWKS(body)
}

// parseJWKS reads a JWKS document (untrusted: the provider's response).
func parseJWKS(body []byte) ([]jose.JSONWebKey, error) {
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("key document: %w", err)
	}
	keys := slices.DeleteFunc(set.Keys, func(k jose.JSONWebKey) bool { return !k.Valid() || !k.IsPublic() })
	if len(keys) == 0 {
		return nil, errors.New("key document has no usable public keys")
	}
	return keys, nil
}
