package jobs_test

import (
	"errors"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/jobs"
)

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		p  account.BundleParams
		ok bool
	}{
		{account.BundleParams{BundleFor: true, BundleForTime: 1, LogFileCount: 1}, true},
		{account.BundleParams{BundleFor: true, BundleForTime: 5, LogFileCount: 1000}, true},
		{account.BundleParams{BundleFor: false, BundleForTime: 0, LogFileCount: 10}, true}, // the time counts only with bundle_for
		{account.BundleParams{BundleFor: true, BundleForTime: 0, LogFileCount: 10}, false},
		{account.BundleParams{BundleFor: true, BundleForTime: 6, LogFileCount: 10}, false},
		{account.BundleParams{LogFileCount: 0}, false},
		{account.BundleParams{LogFileCount: 1001}, false},
	} {
		err := jobs.Validate(c.p)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, jobs.ErrInvalid)) {
			t.Errorf("Validate(%+v) = %v, want ok %v", c.p, err, c.ok)
		}
	}
}

// A stream attached for a peer is woken once at the start and coalesces
// further wake-ups; detaching stops them.
func TestAttachWakes(t *testing.T) {
	s := jobs.New(jobs.Options{})
	wake, detach := s.Attach("p1")
	select {
	case <-wake:
	case <-time.After(time.Second):
		t.Fatal("no wake-up at attach")
	}
	select {
	case <-wake:
		t.Fatal("woken without cause")
	default:
	}
	detach()
}

// Check refuses malformed tokens before any lookup.
func TestCheckMalformedToken(t *testing.T) {
	s := jobs.New(jobs.Options{})
	for _, tok := range []string{"", "not base64!", jobs.EncodeToken([]byte("short"))} {
		if _, err := s.Check(t.Context(), tok); !errors.Is(err, jobs.ErrBadToken) {
			t.Errorf("Check(%q) = %v, want ErrBadToken", tok, err)
		}
	}
}
