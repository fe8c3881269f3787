package setupkey

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestNewAndCheck(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	k, secret, err := New("acc", Options{Reusable: false}, now)
	if err != nil {
		t.Fatal(err)
	}
	if k.UsageLimit != 1 || k.Reusable {
		t.Fatalf("one-off key: got limit %d reusable %v", k.UsageLimit, k.Reusable)
	}
	if !k.ExpiresAt.Equal(now.Add(DefaultExpiry)) {
		t.Fatalf("expiry %v", k.ExpiresAt)
	}
	if strings.Contains(k.Hash, secret) || k.Hash == secret {
		t.Fatal("hash reveals the secret")
	}
	for _, form := range []string{secret, strings.ToLower(secret), " " + secret + "\n"} {
		h, err := Parse(form)
		if err != nil || h != k.Hash {
			t.Fatalf("Parse(%q) = %q, %v; want %q", form, h, err, k.Hash)
		}
	}
	if _, err := Parse("not-a-uuid"); !errors.Is(err, ErrMalformed) {
		t.Fatalf("malformed: %v", err)
	}
	if err := Check(k, now); err != nil {
		t.Fatalf("fresh key: %v", err)
	}
	exp := k
	if err := Check(exp, now.Add(DefaultExpiry)); !errors.Is(err, ErrExpired) {
		t.Fatalf("expired: %v", err)
	}
	rev := k
	rev.Revoked = true
	if err := Check(rev, now); !errors.Is(err, ErrRevoked) {
		t.Fatalf("revoked: %v", err)
	}
	used := k
	used.UsedTimes = 1
	if err := Check(used, now); !errors.Is(err, ErrExhausted) {
		t.Fatalf("exhausted: %v", err)
	}
	unl, _, _ := New("acc", Options{Reusable: true, Expiry: -1}, now)
	unl.UsedTimes = 1000
	if err := Check(unl, now.Add(100*365*24*time.Hour)); err != nil {
		t.Fatalf("unlimited never-expiring key: %v", err)
	}
	if _, _, err := New("acc", Options{Reusable: true, UsageLimit: -1}, now); err == nil {
		t.Fatal("negative usage limit accepted")
	}
}
