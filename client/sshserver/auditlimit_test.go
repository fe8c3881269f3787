package sshserver_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
)

func refusals(evs []sshserver.Event) int {
	return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.Refused })
}

// TestAuditRefusalsPerConn: a logged-in client asking again and again for
// what it is refused (here a local forward on a peer that allows none)
// gets its first refusals audited one by one, the rest as one summary,
// and its connection closed after MaxRefusalsPerConn; its session stays
// in the log.
func TestAuditRefusalsPerConn(t *testing.T) {
	log := &auditLog{}
	r := newRigWith(t, func(o *sshserver.Options) { o.Audit = log.add })
	c := r.dial(t)
	sess, err := c.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if err := sess.Start("sleep 30"); err != nil {
		t.Fatal(err)
	}
	log.wait(t, "session start", func(evs []sshserver.Event) bool {
		return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.SessionStart }) == 1
	})
	tried := 0
	for ; tried < 3*sshserver.MaxRefusalsPerConn; tried++ {
		if _, err := c.Dial("tcp", "127.0.0.1:9"); err == nil {
			t.Fatal("local forward allowed")
		} else if !strings.Contains(err.Error(), "disabled") {
			break // the connection is gone
		}
	}
	if tried != sshserver.MaxRefusalsPerConn {
		t.Fatalf("connection closed after %d refused forwards, want %d", tried, sshserver.MaxRefusalsPerConn)
	}
	evs := log.wait(t, "summary and session end", func(evs []sshserver.Event) bool {
		return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.SessionEnd }) == 1 &&
			count(evs, func(e sshserver.Event) bool { return strings.Contains(e.Reason, "more refused") }) == 1
	})
	time.Sleep(100 * time.Millisecond)
	evs = log.wait(t, "", func([]sshserver.Event) bool { return true })
	if n := refusals(evs); n != sshserver.MaxAuditedRefusalsPerConn+1 {
		t.Fatalf("%d refusals audited, want %d and one summary: %+v", n, sshserver.MaxAuditedRefusalsPerConn, evs)
	}
	for _, e := range evs {
		if strings.Contains(e.Reason, "more refused") {
			want := "24 more refused on this connection (closed after 32 refusals)"
			if !strings.HasPrefix(e.Reason, want) || e.Source != r.local || e.User != r.user {
				t.Fatalf("summary %+v, want %q", e, want)
			}
		}
	}
}

// TestAuditRefusalsPerSource: refusals from one address over many
// connections (here logins with an unknown key) are audited up to a
// burst, then one per RefusalEvery; those in between come as one summary
// with the next one that is audited.
func TestAuditRefusalsPerSource(t *testing.T) {
	log := &auditLog{}
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	r := newRigWith(t, func(o *sshserver.Options) { o.Audit = log.add; o.Now = clock })
	stranger := signer(t)
	try := func() {
		if c, err := sshclient.Dial(context.Background(), r.addr, r.user, stranger, r.host.PublicKey()); err == nil {
			c.Close()
			t.Fatal("unknown key logged in")
		}
	}
	const extra = 5
	for range sshserver.RefusalBurst + extra {
		try()
	}
	time.Sleep(200 * time.Millisecond) // a refusal is audited once the server is done with the connection
	evs := log.wait(t, "burst", func(evs []sshserver.Event) bool { return refusals(evs) == sshserver.RefusalBurst })
	time.Sleep(100 * time.Millisecond)
	if evs = log.wait(t, "", func([]sshserver.Event) bool { return true }); refusals(evs) != sshserver.RefusalBurst {
		t.Fatalf("%d refusals audited at once, want the burst of %d", refusals(evs), sshserver.RefusalBurst)
	}
	mu.Lock()
	now = now.Add(sshserver.RefusalEvery)
	mu.Unlock()
	try()
	evs = log.wait(t, "summary", func(evs []sshserver.Event) bool { return refusals(evs) == sshserver.RefusalBurst+2 })
	sum := evs[len(evs)-2]
	if !strings.HasPrefix(sum.Reason, "5 more refused from this address") || sum.Source != r.local {
		t.Fatalf("summary %+v, then %+v", sum, evs[len(evs)-1])
	}
}
