package sshserver_test

import (
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/client/sshclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
)

// auditLog collects Options.Audit's events.
type auditLog struct {
	mu  sync.Mutex
	evs []sshserver.Event
}

func (l *auditLog) add(e sshserver.Event) { l.mu.Lock(); l.evs = append(l.evs, e); l.mu.Unlock() }

// wait returns the events once pred holds for them (or fails after 5 s).
func (l *auditLog) wait(t *testing.T, what string, pred func([]sshserver.Event) bool) []sshserver.Event {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		l.mu.Lock()
		evs := append([]sshserver.Event(nil), l.evs...)
		l.mu.Unlock()
		if pred(evs) {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: events %+v", what, evs)
		}
	}
}

func count(evs []sshserver.Event, f func(sshserver.Event) bool) int {
	n := 0
	for _, e := range evs {
		if f(e) {
			n++
		}
	}
	return n
}

// TestAudit: sessions are audited when they start and end (kind, user,
// source, duration, never the command), a local forward once per target
// and connection, and each refused login or channel once, with its
// reason.
func TestAudit(t *testing.T) {
	log := &auditLog{}
	r := newRigWith(t, func(o *sshserver.Options) { o.Audit = log.add })
	ctx := context.Background()

	c := r.dial(t)
	if code, out, _ := run(t, c, sshclient.Session{Command: "echo secret-arg"}); code != 0 || out != "secret-arg\n" {
		t.Fatalf("exec: %d %q", code, out)
	}
	evs := log.wait(t, "exec start and end", func(evs []sshserver.Event) bool { return len(evs) >= 2 })
	st, end := evs[0], evs[1]
	if st.Type != sshserver.SessionStart || end.Type != sshserver.SessionEnd || st.Kind != sshserver.KindExec || end.Kind != sshserver.KindExec ||
		st.Session == 0 || st.Session != end.Session || st.User != r.user || st.Source != r.local || end.Duration < 0 || end.At.Before(st.At) {
		t.Fatalf("exec: start %+v end %+v", st, end)
	}
	for _, e := range evs {
		if strings.Contains(e.Reason+e.Forward+e.User, "secret") {
			t.Fatalf("the command reached an event: %+v", e)
		}
	}
	run(t, c, sshclient.Session{Command: "true", PTY: true})
	log.wait(t, "pty exec", func(evs []sshserver.Event) bool {
		return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.SessionEnd && e.PTY }) == 1
	})

	// Refused logins: an unknown key, a user that does not exist, a
	// peer without a policy (after its open connection was closed). One
	// event each, whatever the client retries.
	if cu, err := sshclient.Dial(ctx, r.addr, r.user, signer(t), r.host.PublicKey()); err == nil {
		cu.Close()
		t.Fatal("unknown key logged in")
	}
	if cu, err := sshclient.Dial(ctx, r.addr, "no-such-user-wm", r.client, r.host.PublicKey()); err == nil {
		cu.Close()
		t.Fatal("unknown user logged in")
	}
	r.allow(false)
	if cu, err := sshclient.Dial(ctx, r.addr, r.user, r.client, r.host.PublicKey()); err == nil {
		cu.Close()
		t.Fatal("logged in without a policy")
	}
	r.allow(true)
	evs = log.wait(t, "four refusals", func(evs []sshserver.Event) bool {
		return count(evs, func(e sshserver.Event) bool { return e.Type == sshserver.Refused }) == 4
	})
	var reasons []string
	for _, e := range evs {
		if e.Type == sshserver.Refused {
			if e.Source != r.local || e.Kind != sshserver.KindNone || e.Reason == "" {
				t.Errorf("refusal %+v", e)
			}
			reasons = append(reasons, e.User+": "+e.Reason)
		}
	}
	// In any order: a refusal is audited once the server is done with
	// the connection, which may be after the client saw it fail.
	for _, want := range []string{r.user + ": key SHA256:", "no-such-user-wm: login refused", r.user + ": access revoked, connection closed: no policy lets peer", r.user + ": no policy lets peer"} {
		n := 0
		for _, got := range reasons {
			if strings.HasPrefix(got, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d refusals %q..., want 1: %q", n, want, reasons)
		}
	}
	time.Sleep(100 * time.Millisecond)
	if n := count(log.wait(t, "", func([]sshserver.Event) bool { return true }), func(e sshserver.Event) bool { return e.Type == sshserver.Refused }); n != 4 {
		t.Errorf("%d refusals, want 4", n)
	}
	// A forward on a peer that does not allow it is refused, and audited
	// (on a new connection: revoking the policy closed c).
	if _, err := r.dial(t).Dial("tcp", "127.0.0.1:9"); err == nil {
		t.Fatal("local forward allowed")
	}
	log.wait(t, "refused forward", func(evs []sshserver.Event) bool {
		return count(evs, func(e sshserver.Event) bool {
			return e.Type == sshserver.Refused && e.Kind == sshserver.KindLocalForward
		}) == 1
	})
}

// TestAuditForward: a local forward is audited once per target while its
// connection lasts, however many streams it carries, and ends with it.
func TestAuditForward(t *testing.T) {
	log := &auditLog{}
	r := newRigWith(t, func(o *sshserver.Options) { o.Audit = log.add; o.AllowLocalForwarding = true })
	target, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	go func() {
		for {
			tc, err := target.Accept()
			if err != nil {
				return
			}
			tc.Close()
		}
	}()
	c := r.dial(t)
	for range 3 {
		fc, err := c.Dial("tcp", target.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		fc.Close()
	}
	c.Close()
	evs := log.wait(t, "forward start and end", func(evs []sshserver.Event) bool {
		return count(evs, func(e sshserver.Event) bool {
			return e.Kind == sshserver.KindLocalForward && e.Type == sshserver.SessionEnd
		}) == 1
	})
	if n := count(evs, func(e sshserver.Event) bool { return e.Kind == sshserver.KindLocalForward }); n != 2 {
		t.Fatalf("%d forward events for one target, want a start and an end: %+v", n, evs)
	}
	if evs[0].Forward != target.Addr().String() || evs[0].Session != evs[1].Session {
		t.Fatalf("forward events %+v", evs)
	}
}
