// Package turncreds issues time-limited TURN credentials in the coturn "TURN
// REST API" (use-auth-secret) form the NetBird clients expect: the user name
// is the decimal Unix expiry time and the password is
// base64(HMAC-SHA1(secret, user)). It also answers with static credentials
// when no secret is configured.
package turncreds

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"strconv"
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

// Credentials returns a user name and password valid from now for TTL.
func (i Issuer) Credentials(now time.Time) (user, pass string) {
	if i.Secret == "" {
		return i.StaticUser, i.StaticPass
	}
	user = strconv.FormatInt(now.Add(i.ttl()).Unix(), 10)
	mac := hmac.New(sha1.New, []byte(i.Secret))
	mac.Write([]byte(user))
	return user, base64.StdEncoding.EncodeToString(mac.Sum(nil))
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
// embedded TURN server does).
func Valid(secret, user, pass string, now time.Time) bool {
	exp, err := strconv.ParseInt(user, 10, 64)
	if err != nil || now.Unix() >= exp {
		return false
	}
	mac := hmac.New(sha1.New, []byte(secret))
	mac.Write([]byte(user))
	want := base64.StdEncoding.EncodeToString(mac.Sum(nil))
	return hmac.Equal([]byte(want), []byte(pass))
}
