// Package turncreds issues time-limited TURN credentials in the coturn "TURN
// REST API" (use-auth-secret) form the NetBird clients expect: the user name
// is the decimal Unix expiry time, optionally followed by ":" and a name,
// and the password is base64(HMAC-SHA1(secret, user)). Credentials issued
// with CredentialsFor name one peer, so each peer's differ from every other
// peer's and the TURN server can tell whose allocation it serves (clients
// pass the user name and password through as they are). It also answers
// with static credentials when no secret is configured. It does not revoke
// credentials: they stay valid until they expire.
package turncreds

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"strconv"
	"strings"
	"time"
)

// DefaultTTL is the lifetime of issued credentials.
const DefaultTTL = 12 * time.Hour

// Issuer produces credentials.
type Issuer struct {
	Secret     string // shared with the TURN server; empty means static credentials
	TTL        time.Duration
	StaticUser string
	StaticPass string
}

// Credentials returns a user name and password valid from now for TTL,
// naming no one (shared by whoever gets them).
func (i Issuer) Credentials(now time.Time) (user, pass string) {
	return i.CredentialsFor(now, "")
}

// CredentialsFor returns credentials valid from now for TTL for the peer
// named name (the user name becomes "<expiry>:<name>"). Characters outside
// [A-Za-z0-9._-] in name are dropped.
func (i Issuer) CredentialsFor(now time.Time, name string) (user, pass string) {
	if i.Secret == "" {
		return i.StaticUser, i.StaticPass
	}
	user = strconv.FormatInt(now.Add(i.ttl()).Unix(), 10)
	if name = clean(name); name != "" {
		user += ":" + name
	}
	return user, password(i.Secret, user)
}

func clean(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			return r
		}
		return -1
	}, name)
}

func password(secret, user string) string {
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(user))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Refresh is how often a connected peer gets new credentials: before the
// old ones expire, at three quarters of their lifetime.
func (i Issuer) Refresh() time.Duration { return i.ttl() * 3 / 4 }

func (i Issuer) ttl() time.Duration {
	if i.TTL <= 0 {
		return DefaultTTL
	}
	return i.TTL
}

// Valid checks a user/password pair issued with secret at now (what the
// embedded TURN server does), named or not.
func Valid(secret, user, pass string, now time.Time) bool {
	exp, _, _ := strings.Cut(user, ":")
	t, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= t {
		return false
	}
	return hmac.Equal([]byte(password(secret, user)), []byte(pass))
}
