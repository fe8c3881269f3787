package sshaudit

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

var t0 = time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)

func start(i int) sshserver.Event {
	return sshserver.Event{Type: sshserver.SessionStart, Source: netip.MustParseAddr("100.64.0.2"), User: "alice",
		Kind: sshserver.KindShell, At: t0.Add(time.Duration(i) * time.Second), Session: uint64(i)}
}

// fakeMgmt answers reports with the errors queued in errs (nil: accept)
// and keeps what it accepted.
type fakeMgmt struct {
	mu       sync.Mutex
	errs     []error
	got      []*mgmtpb.WiremeshSSHEventsRequest
	calls    int
	onSend   func() // runs during a send, before it is answered
	inFlight int
}

func (f *fakeMgmt) send(_ context.Context, r *mgmtpb.WiremeshSSHEventsRequest) error {
	f.mu.Lock()
	f.calls++
	var err error
	if len(f.errs) > 0 {
		err, f.errs = f.errs[0], f.errs[1:]
	}
	on := f.onSend
	f.mu.Unlock()
	if on != nil {
		on()
	}
	if err == nil {
		f.mu.Lock()
		f.got = append(f.got, r)
		f.mu.Unlock()
	}
	return err
}

func sessions(rs []*mgmtpb.WiremeshSSHEventsRequest) []uint64 {
	var out []uint64
	for _, r := range rs {
		for _, e := range r.Events {
			out = append(out, e.SessionId)
		}
	}
	return out
}

// TestQueueBounds: past the count or byte bound the oldest events go and
// are counted; management hears the count with the next report and the
// count starts over once it was accepted.
func TestQueueBounds(t *testing.T) {
	f := &fakeMgmt{}
	r := New(Options{Send: f.send, MaxQueued: 3})
	for i := 1; i <= 5; i++ {
		r.Record(start(i))
	}
	if q, lost := r.Stats(); q != 3 || lost != 2 {
		t.Fatalf("queued %d lost %d, want 3 and 2", q, lost)
	}
	r.Tick(context.Background())
	if len(f.got) != 1 || f.got[0].Dropped != 2 || fmt.Sprint(sessions(f.got)) != "[3 4 5]" {
		t.Fatalf("sent %v dropped %d, want sessions 3,4,5 and dropped 2", sessions(f.got), f.got[0].GetDropped())
	}
	r.Record(start(6))
	r.Tick(context.Background())
	if len(f.got) != 2 || f.got[1].Dropped != 0 {
		t.Fatalf("second report dropped %d, want 0 (told already)", f.got[len(f.got)-1].GetDropped())
	}

	// Bytes: a large reason is counted by its encoded size.
	rb := New(Options{Send: f.send, MaxBytes: 1000})
	big := sshserver.Event{Type: sshserver.Refused, Source: netip.MustParseAddr("100.64.0.2"), User: "bob", Reason: strings.Repeat("x", 250), At: t0}
	for range 10 {
		rb.Record(big)
	}
	if q, lost := rb.Stats(); q*300 > 1000 || q == 0 || lost != uint64(10-q) {
		t.Fatalf("byte bound: queued %d lost %d", q, lost)
	}
}

// TestQueueKeepsSessions: a client flooding refusals (each refused
// channel one event) cannot push a session out of a full queue: the
// refusals go first. (With the oldest dropped first, a session start
// followed by 600 refusals left no start in the report.)
func TestQueueKeepsSessions(t *testing.T) {
	f := &fakeMgmt{}
	r := New(Options{Send: f.send})
	r.Record(start(1))
	refused := sshserver.Event{Type: sshserver.Refused, Source: netip.MustParseAddr("100.64.0.2"), User: "alice", Kind: sshserver.KindLocalForward, Reason: "local port forwarding is disabled", At: t0}
	for range 600 {
		r.Record(refused)
	}
	r.Record(start(2))
	if q, lost := r.Stats(); q != DefaultMaxQueued || lost != 600+2-DefaultMaxQueued {
		t.Fatalf("queued %d lost %d", q, lost)
	}
	r.Tick(context.Background())
	var starts []uint64
	n := 0
	for _, req := range f.got {
		for _, e := range req.Events {
			n++
			if e.Type == mgmtpb.WiremeshSSHEvent_SESSION_START {
				starts = append(starts, e.SessionId)
			}
		}
	}
	if fmt.Sprint(starts) != "[1 2]" || n != DefaultMaxQueued || f.got[0].Dropped != 600+2-DefaultMaxQueued || f.got[0].Events[0].SessionId != 1 {
		t.Fatalf("sent %d events, session starts %v, dropped %d; want both starts, the first first", n, starts, f.got[0].Dropped)
	}
	// Sessions only: the oldest goes.
	r2 := New(Options{Send: f.send, MaxQueued: 2})
	for i := 1; i <= 3; i++ {
		r2.Record(start(i))
	}
	f.got = nil
	r2.Tick(context.Background())
	if fmt.Sprint(sessions(f.got)) != "[2 3]" {
		t.Fatalf("sent %v, want 2 3", sessions(f.got))
	}
}

// TestBatches: a queue longer than a report goes out in reports of
// MaxBatch, oldest first, and events recorded while a report is on its
// way are neither lost nor sent twice.
func TestBatches(t *testing.T) {
	f := &fakeMgmt{}
	r := New(Options{Send: f.send})
	for i := 1; i <= 150; i++ {
		r.Record(start(i))
	}
	n := 150
	f.onSend = func() {
		if n < 160 {
			n++
			r.Record(start(n))
		}
	}
	// A tick sends at most maxBatchesPerTick reports: the last event
	// recorded during them goes with the next tick's.
	r.Tick(context.Background())
	if len(f.got) != maxBatchesPerTick {
		t.Fatalf("%d reports in one tick, want %d", len(f.got), maxBatchesPerTick)
	}
	r.Tick(context.Background())
	got := sessions(f.got)
	if len(f.got[0].Events) != MaxBatch {
		t.Fatalf("first report has %d events, want %d", len(f.got[0].Events), MaxBatch)
	}
	if len(got) != n {
		t.Fatalf("sent %d events, want %d", len(got), n)
	}
	for i, s := range got {
		if s != uint64(i+1) {
			t.Fatalf("event %d is session %d: order broken or duplicated", i, s)
		}
	}
	if q, lost := r.Stats(); q != 0 || lost != 0 {
		t.Fatalf("queued %d lost %d after sending", q, lost)
	}
}

// TestFailures: Unimplemented (a NetBird server) stops reporting for the
// run; InvalidArgument loses the report, told as dropped; anything else
// keeps it and waits a doubling number of ticks.
func TestFailures(t *testing.T) {
	ctx := context.Background()
	t.Run("unimplemented", func(t *testing.T) {
		f := &fakeMgmt{errs: []error{status.Error(codes.Unimplemented, "unknown method WiremeshSSHEvents")}}
		r := New(Options{Send: f.send})
		r.Record(start(1))
		r.Tick(ctx)
		r.Record(start(2))
		r.Tick(ctx)
		if q, _ := r.Stats(); q != 0 || f.calls != 1 {
			t.Fatalf("after Unimplemented: queued %d, calls %d; want 0 and 1", q, f.calls)
		}
	})
	t.Run("invalid", func(t *testing.T) {
		f := &fakeMgmt{errs: []error{status.Error(codes.InvalidArgument, "events[0]: at out of range")}}
		r := New(Options{Send: f.send})
		r.Record(start(1))
		r.Tick(ctx)
		r.Record(start(2))
		r.Tick(ctx)
		if len(f.got) != 1 || f.got[0].Dropped != 1 || sessions(f.got)[0] != 2 {
			t.Fatalf("got %v, want session 2 with dropped 1", f.got)
		}
	})
	t.Run("backoff", func(t *testing.T) {
		down := status.Error(codes.Unavailable, "down")
		f := &fakeMgmt{errs: []error{down, down, errors.New("other")}}
		r := New(Options{Send: f.send})
		r.Record(start(1))
		var callsAt []int
		for tick := 1; tick <= 12; tick++ {
			before := f.calls
			r.Tick(ctx)
			if f.calls != before {
				callsAt = append(callsAt, tick)
			}
		}
		// Fails at 1 (wait 1), 3 (wait 2), 6 (wait 4), succeeds at 11.
		if want := []int{1, 3, 6, 11}; fmt.Sprint(callsAt) != fmt.Sprint(want) {
			t.Fatalf("sent at ticks %v, want %v", callsAt, want)
		}
		if len(f.got) != 1 || sessions(f.got)[0] != 1 {
			t.Fatalf("got %v, want the event kept through the failures", f.got)
		}
	})
}

// TestWireEvent: what the client chose is bounded and cleaned to what
// management takes; the command itself is never part of an event.
func TestWireEvent(t *testing.T) {
	src := netip.MustParseAddr("::ffff:100.64.0.9")
	ev := wireEvent(sshserver.Event{Type: sshserver.Refused, Source: src, User: "root;rm -rf", Reason: "bad\x1b[31m\n" + strings.Repeat("é", 300), At: t0})
	if ev.SourceIp != "100.64.0.9" || ev.UnixUser != "" || ev.Type != mgmtpb.WiremeshSSHEvent_REFUSED {
		t.Fatalf("got %v", ev)
	}
	if len(ev.Reason) > maxReason || !utf8.ValidString(ev.Reason) || strings.ContainsAny(ev.Reason, "\x1b\n") || !strings.HasPrefix(ev.Reason, "bad?[31m?") {
		t.Fatalf("reason %q", ev.Reason)
	}
	fw := wireEvent(sshserver.Event{Type: sshserver.SessionStart, Source: src, User: "user@corp.example", Kind: sshserver.KindLocalForward, Forward: "evil host\x00:22", At: t0})
	if fw.Forward != "evil?host?:22" || fw.UnixUser != "user@corp.example" || fw.Kind != mgmtpb.WiremeshSSHEvent_LOCAL_FORWARD {
		t.Fatalf("got %v", fw)
	}
	end := wireEvent(sshserver.Event{Type: sshserver.SessionEnd, Source: src, User: "a", Kind: sshserver.KindSFTP, Duration: 2500 * time.Millisecond, At: t0})
	if end.DurationMillis != 2500 || end.Kind != mgmtpb.WiremeshSSHEvent_SFTP {
		t.Fatalf("got %v", end)
	}
	tok := wireEvent(sshserver.Event{Type: sshserver.SessionStart, Source: src, User: "a", Kind: sshserver.KindShell, At: t0, JWTUser: "google-oauth2|42"})
	if tok.JwtUser != "google-oauth2|42" {
		t.Fatalf("token user: got %v", tok)
	}
	if bad := wireEvent(sshserver.Event{Type: sshserver.SessionStart, Source: src, User: "a", Kind: sshserver.KindShell, At: t0, JWTUser: "a b\n" + strings.Repeat("u", 300)}); len(bad.JwtUser) > maxJWTUser || strings.ContainsAny(bad.JwtUser, " \n") {
		t.Fatalf("token user not bounded: %q", bad.JwtUser)
	}
	if wireEvent(sshserver.Event{Type: sshserver.SessionStart, User: "a", Kind: sshserver.KindShell, At: t0}) != nil {
		t.Fatal("an event without a source was converted")
	}
	if wireEvent(sshserver.Event{Type: sshserver.SessionStart, Source: src, User: "a", At: t0}) != nil {
		t.Fatal("a session without a kind was converted")
	}
}

// TestRunStops: Run never blocks Record, and ends (with no goroutine
// left) when its context does.
func TestRunStops(t *testing.T) {
	base := runtime.NumGoroutine()
	block := make(chan struct{})
	f := &fakeMgmt{}
	f.onSend = func() { <-block }
	r := New(Options{Send: func(ctx context.Context, req *mgmtpb.WiremeshSSHEventsRequest) error {
		err := f.send(ctx, req)
		return err
	}})
	ticks := make(chan time.Time)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx, ticks) }()
	r.Record(start(1))
	ticks <- t0 // the send now hangs on block
	recorded := make(chan struct{})
	go func() {
		for i := 2; i < 2000; i++ {
			r.Record(start(i))
		}
		close(recorded)
	}()
	select {
	case <-recorded:
	case <-time.After(5 * time.Second):
		t.Fatal("Record blocked while a report was on its way")
	}
	if q, lost := r.Stats(); q != DefaultMaxQueued || lost != 1999-DefaultMaxQueued {
		t.Fatalf("queued %d lost %d, want %d and %d", q, lost, DefaultMaxQueued, 1999-DefaultMaxQueued)
	}
	close(block)
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not end with its context")
	}
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines left (%d before)", runtime.NumGoroutine(), base)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostKeyMismatch: a mismatch this peer's client saw goes out as a
// HOST_KEY_MISMATCH event with no source (this peer is the source), the
// target, port, user and both fingerprints; one management would refuse
// is not queued; in a full queue mismatches go before sessions (any
// local user can report them).
func TestHostKeyMismatch(t *testing.T) {
	const fpA, fpB = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU", "SHA256:ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs"
	f := &fakeMgmt{}
	r := New(Options{Send: f.send, MaxQueued: 2})
	m := HostKeyMismatch{Target: netip.MustParseAddr("::ffff:100.64.0.1"), Port: 22, User: "alice", Presented: fpA, Expected: fpB, At: t0}
	for _, bad := range []func(*HostKeyMismatch){
		func(m *HostKeyMismatch) { m.Target = netip.Addr{} },
		func(m *HostKeyMismatch) { m.Port = 0 },
		func(m *HostKeyMismatch) { m.Expected = m.Presented },
		func(m *HostKeyMismatch) { m.Presented = "" },
		func(m *HostKeyMismatch) { m.Expected = fpB + "x" },
	} {
		b := m
		bad(&b)
		r.RecordHostKeyMismatch(b)
	}
	if q, _ := r.Stats(); q != 0 {
		t.Fatalf("%d invalid mismatches queued", q)
	}
	r.Record(start(1))
	r.RecordHostKeyMismatch(m)
	r.Record(start(2)) // the mismatch goes, not session 1
	r.Tick(context.Background())
	if len(f.got) != 1 || fmt.Sprint(sessions(f.got)) != "[1 2]" || f.got[0].Dropped != 1 {
		t.Fatalf("sent %v, want sessions 1 and 2, one dropped", f.got)
	}
	r = New(Options{Send: f.send})
	r.RecordHostKeyMismatch(m)
	f.got = nil
	r.Tick(context.Background())
	if len(f.got) != 1 || len(f.got[0].Events) != 1 {
		t.Fatalf("sent %v", f.got)
	}
	got := f.got[0].Events[0]
	want := &mgmtpb.WiremeshSSHEvent{Type: mgmtpb.WiremeshSSHEvent_HOST_KEY_MISMATCH, TargetIp: "100.64.0.1", TargetPort: 22, UnixUser: "alice",
		PresentedKeyFingerprint: fpA, ExpectedKeyFingerprint: fpB, At: got.GetAt()}
	if !proto.Equal(got, want) || !got.GetAt().AsTime().Equal(t0) {
		t.Fatalf("sent %v, want %v", got, want)
	}
	odd := m
	odd.User = "-oProxyCommand=x"
	// A user name management would refuse is sent as empty.
	r2 := New(Options{Send: f.send})
	r2.RecordHostKeyMismatch(odd)
	f.got = nil
	r2.Tick(context.Background())
	if len(f.got) != 1 || f.got[0].Events[0].GetUnixUser() != "" {
		t.Fatalf("sent %v, want the user empty", f.got)
	}
}
