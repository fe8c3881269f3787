package jobs_test

import (
	"context"
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

// blockingReader signals its first Read and then fails once released.
type blockingReader struct {
	started chan struct{}
	release chan struct{}
}

func (r *blockingReader) Read([]byte) (int, error) {
	select {
	case <-r.started:
	default:
		close(r.started)
	}
	<-r.release
	return 0, errors.New("client went away")
}

// TestOneUploadPerJob: while one upload of a job's bundle is being read,
// another with the same token is refused before its body is read, so one
// token cannot make the server hold many bundles at once.
func TestOneUploadPerJob(t *testing.T) {
	s := jobs.New(jobs.Options{})
	j := account.Job{ID: "job-1", AccountID: "acc"}
	tok := jobs.EncodeToken(make([]byte, jobs.TokenSize))
	slow := &blockingReader{started: make(chan struct{}), release: make(chan struct{})}
	done := make(chan error, 1)
	go func() {
		_, err := s.Upload(context.Background(), j, tok, slow)
		done <- err
	}()
	<-slow.started
	second := &blockingReader{started: make(chan struct{}), release: make(chan struct{})}
	close(second.release)
	if _, err := s.Upload(context.Background(), j, tok, second); !errors.Is(err, jobs.ErrBadToken) {
		t.Fatalf("second upload while the first is read: %v, want ErrBadToken", err)
	}
	select {
	case <-second.started:
		t.Fatal("the second upload's body was read")
	default:
	}
	close(slow.release)
	if err := <-done; err == nil {
		t.Fatal("the failed first upload reported success")
	}
}
