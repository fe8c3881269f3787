package oidcop

import (
	"context"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
)

// fixedFactor is an enrolled second factor whose right code is fixed; it
// counts the codes it checks.
type fixedFactor struct {
	right  string
	checks atomic.Int64
}

func (f *fixedFactor) Status(context.Context, string) (bool, bool, error) { return true, true, nil }
func (f *fixedFactor) Enrol(context.Context, string, string) (Enrolment, error) {
	return Enrolment{}, ErrBadCode
}
func (f *fixedFactor) Confirm(context.Context, string, string) ([]string, error) {
	return nil, ErrBadCode
}
func (f *fixedFactor) Verify(_ context.Context, _, code string) error {
	f.checks.Add(1)
	if code != f.right {
		return ErrBadCode
	}
	return nil
}

const (
	mfaEmail = "a@example.com"
	mfaPW    = "right-password"
	mfaCode  = "123456"
)

// awaitingCode starts a login from src and gives the right password: the
// login waits for the second factor.
func (h *harness) awaitingCode(t *testing.T, src string) string {
	t.Helper()
	id := h.authorize(t, src)
	if code := h.login(t, id, mfaEmail, mfaPW, src); code != http.StatusOK {
		t.Fatalf("password: %d, want the code form", code)
	}
	return id
}

func (h *harness) code(t *testing.T, id, otp, src string) (int, string) {
	t.Helper()
	code, body, _ := h.do(t, http.MethodPost, mfaPath, url.Values{"authRequestID": {id}, "otp": {otp}}, src)
	return code, body
}

// TestCodeGuessesLimited: after codeBurst wrong codes, from any source and
// over any pending logins, the next code is refused without being checked
// even when right; one more is allowed per codeRefill.
func TestCodeGuessesLimited(t *testing.T) {
	f := &fixedFactor{right: mfaCode}
	h := start(t, Options{TrustedProxies: loopback, SecondFactor: f}, map[string]string{mfaEmail: mfaPW})
	const a, b = "203.0.113.1", "198.51.100.7"
	ids := []string{h.awaitingCode(t, a), h.awaitingCode(t, b)}
	for i := range codeBurst {
		id, src := ids[i%2], []string{a, b}[i%2]
		if code, _ := h.code(t, id, "000000", src); code != http.StatusUnauthorized {
			t.Fatalf("wrong code %d: %d, want 401", i+1, code)
		}
	}
	if n := f.checks.Load(); n != codeBurst {
		t.Fatalf("%d codes checked, want %d", n, codeBurst)
	}
	for _, src := range []string{a, b, "192.0.2.9"} {
		if code, _ := h.code(t, ids[1], mfaCode, src); code != http.StatusTooManyRequests {
			t.Fatalf("right code past the limit from %s: %d, want 429", src, code)
		}
	}
	if n := f.checks.Load(); n != codeBurst {
		t.Fatalf("codes past the limit were checked: %d checks, want %d", n, codeBurst)
	}
	logs := h.logs.String()
	if !strings.Contains(logs, "second factor locked") || !strings.Contains(logs, "subject=sub-"+mfaEmail) {
		t.Fatalf("no lockout warning in the log:\n%s", logs)
	}
	if strings.Contains(logs, mfaCode) || strings.Contains(logs, "000000") {
		t.Fatalf("a code is in the log:\n%s", logs)
	}

	// One more try per refill: a wrong one spends it.
	h.advance(codeRefill)
	id := h.awaitingCode(t, a)
	if code, _ := h.code(t, id, "000001", a); code != http.StatusUnauthorized {
		t.Fatalf("wrong code after the refill: %d, want 401 (checked)", code)
	}
	if code, _ := h.code(t, id, mfaCode, a); code != http.StatusTooManyRequests {
		t.Fatalf("second code after one refill: %d, want 429", code)
	}
	h.advance(codeRefill)
	if code, _ := h.code(t, id, mfaCode, a); code != http.StatusFound {
		t.Fatalf("right code after the next refill: %d, want the redirect", code)
	}
}

// TestPendingLoginEndsAfterWrongCodes: maxCodesPerLogin wrong codes end
// the pending login, though the account's limit still allows codes: the
// person starts again with the password.
func TestPendingLoginEndsAfterWrongCodes(t *testing.T) {
	f := &fixedFactor{right: mfaCode}
	h := start(t, Options{TrustedProxies: loopback, SecondFactor: f}, map[string]string{mfaEmail: mfaPW})
	const src = "203.0.113.1"
	id := h.awaitingCode(t, src)
	step := codeRefill * 2 / 5 // slower than the account's limit
	for i := range maxCodesPerLogin - 1 {
		if code, _ := h.code(t, id, "000000", src); code != http.StatusUnauthorized {
			t.Fatalf("wrong code %d: %d, want 401", i+1, code)
		}
		h.advance(step)
	}
	code, body := h.code(t, id, "000000", src)
	if code != http.StatusUnauthorized || !strings.Contains(body, "login has ended") {
		t.Fatalf("wrong code %d: %d %q, want the login ended", maxCodesPerLogin, code, body)
	}
	if !strings.Contains(h.logs.String(), "login ended: too many wrong second factor codes") {
		t.Fatalf("no warning of the ended login:\n%s", h.logs.String())
	}
	checked := f.checks.Load()
	if code, _ := h.code(t, id, mfaCode, src); code != http.StatusNotFound {
		t.Fatalf("right code on the ended login: %d, want 404", code)
	}
	if f.checks.Load() != checked {
		t.Fatal("a code of an ended login was checked")
	}
	// The account is not locked: a new login with the password works.
	if code, _ := h.code(t, h.awaitingCode(t, src), mfaCode, src); code != http.StatusFound {
		t.Fatalf("new login after the ended one: %d, want the redirect", code)
	}
}
