package users

import (
	"errors"
	"fmt"
	"net/mail"
	"strings"
	"sync"
	"time"
	"unicode"

	"golang.org/x/crypto/bcrypt"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/idp"
)

// One password policy for every password a person chooses (setup, invite
// acceptance, password change): at least idp.MinPasswordLen characters, at
// most 72 bytes (bcrypt's limit), with an upper-case letter, a digit and a
// character that is neither. It is checked before any hashing.

// CheckPassword applies the password policy.
func CheckPassword(pw string) error {
	var upper, digit, other bool
	for _, r := range pw {
		switch {
		case unicode.IsUpper(r):
			upper = true
		case unicode.IsDigit(r):
			digit = true
		case !unicode.IsLetter(r):
			other = true
		}
	}
	if len(pw) > 72 {
		return fmt.Errorf("%w: the password must be at most 72 bytes", ErrInvalid)
	}
	if len(pw) < idp.MinPasswordLen || !upper || !digit || !other {
		return fmt.Errorf("%w: the password needs at least 8 characters with an upper-case letter, a digit and a symbol", ErrInvalid)
	}
	return nil
}

func comparePassword(hash, pw string) error {
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(pw))
}

// checkEmail accepts a bare address (addr-spec, as "a@example.com") and
// returns it trimmed; display-name forms ("Name" <a@b.c>) and anything
// else are refused.
func checkEmail(s string) (string, error) {
	s = strings.TrimSpace(s)
	a, err := mail.ParseAddress(s)
	if err != nil || s == "" || a.Name != "" || a.Address != s {
		return "", fmt.Errorf("%w: a valid e-mail address is required (a bare address such as name@example.com, without a display name or angle brackets)", ErrInvalid)
	}
	return s, nil
}

// ErrTooManyAttempts: too many wrong passwords; wait before trying again.
var ErrTooManyAttempts = errors.New("too many wrong passwords; wait a minute and try again")

// Wrong old passwords on a password change: 5 per user, then one more
// each minute.
const (
	passwordBurst  = 5
	passwordRefill = time.Minute
)

// guard counts failures per user in a leaky bucket. It lives in one
// management instance; its memory is bounded by pruning drained buckets.
type guard struct {
	burst  float64
	refill time.Duration

	mu    sync.Mutex
	fails map[account.UserID]bucket
}

type bucket struct {
	level float64
	at    time.Time
}

func newGuard(burst int, refill time.Duration) *guard {
	return &guard{burst: float64(burst), refill: refill, fails: map[account.UserID]bucket{}}
}

func (g *guard) drained(b bucket, now time.Time) float64 {
	return max(0, b.level-float64(now.Sub(b.at))/float64(g.refill))
}

// allow reports whether id may try once more.
func (g *guard) allow(id account.UserID, now time.Time) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.fails[id]
	return !ok || g.drained(b, now)+1 <= g.burst
}

// fail records a wrong password of id.
func (g *guard) fail(id account.UserID, now time.Time) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.fails) > 10000 {
		for k, b := range g.fails {
			if g.drained(b, now) == 0 {
				delete(g.fails, k)
			}
		}
	}
	g.fails[id] = bucket{level: g.drained(g.fails[id], now) + 1, at: now}
}
