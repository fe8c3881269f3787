package idp

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base32"
	"encoding/hex"
	"errors"
	"fmt"
	"image/png"
	"slices"
	"strings"
	"time"

	"github.com/pquerna/otp"
	"github.com/pquerna/otp/totp"

	"github.com/wiremesh/wiremesh/internal/oidcop"
	"github.com/wiremesh/wiremesh/management/store"
)

// TOTP codes: RFC 6238 defaults every authenticator app reads (SHA-1, six
// digits, 30 s), one step of skew either way.
const (
	totpPeriod     = 30
	totpSkew       = 1
	recoveryCodes  = 10
	recoveryLength = 10 // characters of base32, about 50 bits
)

var totpOpts = totp.ValidateOpts{Period: totpPeriod, Skew: totpSkew, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1}

// TOTP is the built-in provider's second factor (pquerna/otp), kept in the
// store by subject, beside the local login it belongs to.
type TOTP struct {
	Store *store.Store
	// Issuer names the server in the authenticator app.
	Issuer string
	// Required tells whether a subject must use a second factor (its
	// account requires one); nil: nobody must (an enrolled factor is still
	// asked for).
	Required func(ctx context.Context, subject string) (bool, error)
	Now      func() time.Time
}

var _ oidcop.SecondFactor = TOTP{}

func (t TOTP) now() time.Time {
	if t.Now == nil {
		return time.Now()
	}
	return t.Now()
}

func (t TOTP) factor(ctx context.Context, subject string) (store.TOTPFactor, error) {
	var f store.TOTPFactor
	err := t.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		f, err = tx.TOTPFactor(ctx, subject)
		return err
	})
	return f, err
}

// Status implements oidcop.SecondFactor.
func (t TOTP) Status(ctx context.Context, subject string) (bool, bool, error) {
	f, err := t.factor(ctx, subject)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return false, false, fmt.Errorf("second factor: %w", err)
	}
	enrolled := err == nil && f.Confirmed
	if enrolled || t.Required == nil {
		return enrolled, false, nil
	}
	required, err := t.Required(ctx, subject)
	if err != nil {
		return false, false, fmt.Errorf("second factor required: %w", err)
	}
	return false, required, nil
}

// errEnrolled refuses to replace a confirmed factor by a new enrolment:
// knowing the password must not be enough to take the second factor over.
var errEnrolled = errors.New("a second factor is already set up")

// Enrol implements oidcop.SecondFactor.
func (t TOTP) Enrol(ctx context.Context, subject, email string) (oidcop.Enrolment, error) {
	key, err := totp.Generate(totp.GenerateOpts{Issuer: t.Issuer, AccountName: email, Period: totpPeriod, Digits: otp.DigitsSix, Algorithm: otp.AlgorithmSHA1})
	if err != nil {
		return oidcop.Enrolment{}, fmt.Errorf("second factor: %w", err)
	}
	img, err := key.Image(200, 200)
	if err != nil {
		return oidcop.Enrolment{}, fmt.Errorf("second factor QR code: %w", err)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return oidcop.Enrolment{}, fmt.Errorf("second factor QR code: %w", err)
	}
	err = t.Store.Tx(ctx, func(tx *store.Tx) error {
		f, err := tx.TOTPFactor(ctx, subject)
		if err == nil && f.Confirmed {
			return errEnrolled
		}
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		return tx.PutTOTPFactor(ctx, store.TOTPFactor{Subject: subject, Secret: key.Secret(), CreatedAt: t.now()})
	})
	if err != nil {
		return oidcop.Enrolment{}, fmt.Errorf("second factor: %w", err)
	}
	return oidcop.Enrolment{URL: key.URL(), Secret: key.Secret(), QRPNG: b.Bytes()}, nil
}

// step returns the time step whose code code is, within the skew.
func (t TOTP) step(secret, code string) (int64, bool) {
	if len(code) != int(otp.DigitsSix) {
		return 0, false
	}
	now := t.now()
	for k := -totpSkew; k <= totpSkew; k++ {
		at := now.Add(time.Duration(k*totpPeriod) * time.Second)
		want, err := totp.GenerateCodeCustom(secret, at, totpOpts)
		if err == nil && subtle.ConstantTimeCompare([]byte(want), []byte(code)) == 1 {
			return at.Unix() / totpPeriod, true
		}
	}
	return 0, false
}

// Confirm implements oidcop.SecondFactor.
func (t TOTP) Confirm(ctx context.Context, subject, code string) ([]string, error) {
	var plain []string
	err := t.Store.Tx(ctx, func(tx *store.Tx) error {
		f, err := tx.TOTPFactor(ctx, subject)
		if err != nil {
			return err
		}
		if f.Confirmed {
			return errEnrolled
		}
		st, ok := t.step(f.Secret, code)
		if !ok {
			return oidcop.ErrBadCode
		}
		f.Recovery, plain = nil, nil
		for range recoveryCodes {
			c := newRecoveryCode()
			plain = append(plain, c)
			f.Recovery = append(f.Recovery, hashRecovery(c))
		}
		f.Confirmed, f.LastStep = true, st
		return tx.PutTOTPFactor(ctx, f)
	})
	if err != nil {
		return nil, fmt.Errorf("second factor: %w", err)
	}
	return plain, nil
}

// Verify implements oidcop.SecondFactor: a code of the current step (or
// one either side) not older than the last accepted one, or an unused
// recovery code, which is then used up.
func (t TOTP) Verify(ctx context.Context, subject, code string) error {
	err := t.Store.Tx(ctx, func(tx *store.Tx) error {
		f, err := tx.TOTPFactor(ctx, subject)
		if err != nil {
			return err
		}
		if !f.Confirmed {
			return oidcop.ErrBadCode
		}
		if st, ok := t.step(f.Secret, code); ok {
			if err := tx.UseTOTPStep(ctx, subject, st); errors.Is(err, store.ErrNotFound) {
				return oidcop.ErrBadCode // replayed
			} else if err != nil {
				return err
			}
			return nil
		}
		h := hashRecovery(code)
		i := slices.IndexFunc(f.Recovery, func(s string) bool { return subtle.ConstantTimeCompare([]byte(s), []byte(h)) == 1 })
		if i < 0 {
			return oidcop.ErrBadCode
		}
		f.Recovery = slices.Delete(f.Recovery, i, i+1)
		return tx.PutTOTPFactor(ctx, f)
	})
	if errors.Is(err, store.ErrNotFound) {
		return oidcop.ErrBadCode
	}
	if err != nil && !errors.Is(err, oidcop.ErrBadCode) {
		return fmt.Errorf("second factor: %w", err)
	}
	return err
}

var recoveryEncoding = base32.StdEncoding.WithPadding(base32.NoPadding)

func newRecoveryCode() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	s := strings.ToLower(recoveryEncoding.EncodeToString(b))[:recoveryLength]
	return s[:5] + "-" + s[5:]
}

// hashRecovery normalises a typed recovery code (case, dashes, spaces)
// and hashes it.
func hashRecovery(code string) string {
	c := strings.ToLower(strings.NewReplacer("-", "", " ", "").Replace(code))
	sum := sha256.Sum256([]byte(c))
	return hex.EncodeToString(sum[:])
}
