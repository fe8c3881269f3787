package oidcop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
)

// Limits bound what unauthenticated clients can make the provider hold:
// pending logins and device codes, in count and in bytes, per source
// address and overall. A request past a bound is refused (429 or 503
// with an OAuth error); pending requests are never evicted to make room.
// Zero fields take the defaults below.
type Limits struct {
	MaxPending, MaxPendingPerSource           int // default 10000, 100
	MaxPendingBytes, MaxPendingBytesPerSource int // default 32 MiB, 1 MiB
	// MaxRefreshFamilies bounds the logins holding refresh tokens per
	// user (default 20); a new login past it ends the oldest.
	MaxRefreshFamilies int
}

func (l Limits) withDefaults() Limits {
	if l.MaxPending <= 0 {
		l.MaxPending = 10000
	}
	if l.MaxPendingPerSource <= 0 {
		l.MaxPendingPerSource = 100
	}
	if l.MaxPendingBytes <= 0 {
		l.MaxPendingBytes = 32 << 20
	}
	if l.MaxPendingBytesPerSource <= 0 {
		l.MaxPendingBytesPerSource = 1 << 20
	}
	if l.MaxRefreshFamilies <= 0 {
		l.MaxRefreshFamilies = defaultMaxRefreshFamilies
	}
	return l
}

const (
	// maxQuery and maxBody bound any request's query string and body.
	maxQuery = 16 << 10
	maxBody  = 64 << 10
	// maxParams bounds the parameters of a request.
	maxParams = 64
	// maxOther bounds a parameter without its own cap below.
	maxOther = 256
	// entryOverhead is charged per pending entry on top of its fields
	// (maps, struct, IDs).
	entryOverhead = 512
)

// paramCaps are the longest values accepted per parameter, in bytes.
var paramCaps = map[string]int{
	"client_id": 128, "redirect_uri": 2048, "state": 1024, "nonce": 512,
	"scope": 1024, "response_type": 64, "response_mode": 32, "prompt": 64,
	"code_challenge": 128, "code_challenge_method": 16, "login_hint": 320,
	"ui_locales": 128, "acr_values": 256, "max_age": 16, "display": 32,
	"id_token_hint": 8192, "request": 8192, "request_uri": 2048,
	// Token endpoint.
	"grant_type": 128, "code": 256, "code_verifier": 128, "device_code": 256,
	"refresh_token": 4096, "client_assertion": 8192, "client_assertion_type": 128,
	"client_secret": 256, "token": 8192, "token_type_hint": 64, "assertion": 8192,
	"subject_token": 8192, "subject_token_type": 128, "actor_token": 8192, "actor_token_type": 128,
	"requested_token_type": 128, "audience": 512, "resource": 2048, "id": 64,
	// The login and device pages.
	"authRequestID": 64, "user_code": 32, "email": 320, "password": 1024, "idp": 64, "otp": 64, "enrol": 8,
}

// maxScopes bounds the scopes of one request.
const maxScopes = 16

// errField is a parameter past its cap or otherwise unacceptable.
var errField = errors.New("invalid parameter")

// checkParams bounds every value of a parsed form or query.
func checkParams(v url.Values) error {
	if len(v) > maxParams {
		return fmt.Errorf("%w: more than %d parameters", errField, maxParams)
	}
	for name, vals := range v {
		limit, ok := paramCaps[name]
		if !ok {
			limit = maxOther
		}
		if len(vals) > 1 {
			return fmt.Errorf("%w: %.64q given more than once", errField, name)
		}
		for _, s := range vals {
			if len(s) > limit {
				return fmt.Errorf("%w: %.64q is longer than %d bytes", errField, name, limit)
			}
		}
	}
	if len(strings.Fields(v.Get("scope"))) > maxScopes {
		return fmt.Errorf("%w: more than %d scopes", errField, maxScopes)
	}
	return nil
}

// valuesSize is what holding v would cost at most.
func valuesSize(v url.Values) int {
	n := entryOverhead
	for k, vals := range v {
		for _, s := range vals {
			n += len(k) + len(s)
		}
	}
	return n
}

// oauthError answers with an OAuth error object (RFC 6749 §5.2).
func oauthError(w http.ResponseWriter, status int, code, desc string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	if status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", "60")
	}
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
}

type ctxKey int

const (
	srcKey ctxKey = iota
	slotKey
)

func withSource(ctx context.Context, a netip.Addr) context.Context {
	return context.WithValue(ctx, srcKey, a)
}

func sourceFrom(ctx context.Context) netip.Addr {
	a, _ := ctx.Value(srcKey).(netip.Addr)
	return a
}

func slotFrom(ctx context.Context) *slot {
	s, _ := ctx.Value(slotKey).(*slot)
	return s
}
