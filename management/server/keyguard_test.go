package server_test

import (
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
)

// frozen is a clock that stands still, so no wrong-key budget refills
// while a test runs.
func frozen() func() time.Time {
	at := time.Now()
	return func() time.Time { return at }
}

// TestParallelKeyGuessesBounded: 60 wrong setup keys at once from one
// source run at most the burst (10) of login transactions; the rest get
// ResourceExhausted after a read-only lookup. A forged x-forwarded-for
// from an untrusted peer does not spread them over buckets.
func TestParallelKeyGuessesBounded(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{ExpiryCheck: time.Hour, Now: frozen()})
	c := ctx(t)
	txs0, _, _, _ := e.srv.Store.Timing()
	var wg sync.WaitGroup
	var denied, limited atomic.Int64
	for i := range 60 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			gc := metadata.AppendToOutgoingContext(c, "x-forwarded-for", fmt.Sprintf("192.0.2.%d", i))
			_, err := testpeer.New(e.conn, "guesser").Login(gc, uuid.NewString())
			switch code(err) {
			case codes.PermissionDenied:
				denied.Add(1)
			case codes.ResourceExhausted:
				limited.Add(1)
			default:
				t.Errorf("guess: %v", err)
			}
		}()
	}
	wg.Wait()
	txs1, _, _, _ := e.srv.Store.Timing()
	if denied.Load() != 10 || limited.Load() != 50 {
		t.Fatalf("60 parallel guesses: %d evaluated, %d limited; want 10 and 50", denied.Load(), limited.Load())
	}
	if n := txs1 - txs0; n > 10 {
		t.Fatalf("60 parallel guesses ran %d store transactions, want at most 10", n)
	}
}

// TestSetupKeyLimitTrustedProxy: behind a trusted proxy the limit is per
// forwarded client: one client's guesses do not limit another's.
func TestSetupKeyLimitTrustedProxy(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Now: frozen()})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	from := func(ip string) *testpeer.Peer { return testpeer.New(e.conn, "p-"+ip) }
	attacker := metadata.AppendToOutgoingContext(c, "x-forwarded-for", "203.0.113.1")
	for range 10 {
		if _, err := from("a").Login(attacker, uuid.NewString()); code(err) != codes.PermissionDenied {
			t.Fatalf("guess: %v", err)
		}
	}
	if _, err := from("a").Login(attacker, uuid.NewString()); code(err) != codes.ResourceExhausted {
		t.Fatalf("guess past the burst: %v", err)
	}
	other := metadata.AppendToOutgoingContext(c, "x-forwarded-for", "203.0.113.2")
	if _, err := from("b").Login(other, uuid.NewString()); code(err) != codes.PermissionDenied {
		t.Fatalf("another client behind the proxy is limited: %v", err)
	}
	if _, err := from("c").Login(attacker, secret); err != nil {
		t.Fatalf("a valid key from the limited client: %v", err)
	}
}
