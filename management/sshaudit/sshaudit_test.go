package sshaudit

import (
	"errors"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wiremesh/wiremesh/management/account"
)

var now = time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)

func good() Event {
	return Event{Type: Start, Source: netip.MustParseAddr("100.64.0.2"), User: "alice", Kind: Shell, At: now}
}

// Fingerprints of two different keys, as ssh.FingerprintSHA256 writes them.
const (
	fpA = "SHA256:47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"
	fpB = "SHA256:ypeBEsobvcr6wjGzmiPcTaeG7/gUfE5yuYB3ha/uSLs"
)

// mismatch is a valid host key mismatch: the reporter dialed 100.64.0.1.
func mismatch() Event {
	return Event{Type: HostKeyMismatch, Target: netip.MustParseAddr("100.64.0.1"), Port: 22, User: "alice", At: now, Presented: fpA, Expected: fpB}
}

// TestCheckMismatch: a host key mismatch has a target, a port and two
// different fingerprints, no source (the reporter is the source) and
// nothing of a session; other events have none of its fields.
func TestCheckMismatch(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mut   func(*Event)
		field string
	}{
		{"mismatch", func(*Event) {}, ""},
		{"ipv6 target", func(e *Event) { e.Target = netip.MustParseAddr("fd00:1234::1") }, ""},
		{"no user", func(e *Event) { e.User = "" }, ""},
		{"source set", func(e *Event) { e.Source = netip.MustParseAddr("100.64.0.2") }, "source_ip"},
		{"no target", func(e *Event) { e.Target = netip.Addr{} }, "target_ip"},
		{"zoned target", func(e *Event) { e.Target = netip.MustParseAddr("fe80::1%eth0") }, "target_ip"},
		{"no port", func(e *Event) { e.Port = 0 }, "target_port"},
		{"same keys", func(e *Event) { e.Expected = e.Presented }, "presented_key_fingerprint"},
		{"md5 fingerprint", func(e *Event) { e.Presented = "MD5:16:27:ac:a5:76:28:2d:36:63:1b:56:4d:eb:df:a6:48" }, "presented_key_fingerprint"},
		{"short fingerprint", func(e *Event) { e.Expected = fpB[:40] }, "expected_key_fingerprint"},
		{"fingerprint with control", func(e *Event) { e.Expected = fpB[:49] + "\x1b" }, "expected_key_fingerprint"},
		{"kind", func(e *Event) { e.Kind = Shell }, "kind"},
		{"session", func(e *Event) { e.Session = 3 }, "kind"},
		{"jwt user", func(e *Event) { e.JWTUser = "u1" }, "kind"},
		{"reason", func(e *Event) { e.Reason = "forged" }, "reason"},
		{"bad user", func(e *Event) { e.User = "-oProxyCommand" }, "unix_user"},
		{"old", func(e *Event) { e.At = now.Add(-MaxAge - time.Second) }, "at"},
		{"start with a target", func(e *Event) { *e = good(); e.Target = netip.MustParseAddr("100.64.0.1") }, "target_ip"},
		{"refusal with fingerprints", func(e *Event) {
			*e = good()
			e.Type, e.Kind, e.Reason, e.Presented = Refused, KindNone, "no", fpA
		}, "target_ip"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := mismatch()
			tc.mut(&e)
			err := Check(e, now)
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("got %v, want ErrInvalid naming %s", err, tc.field)
			}
		})
	}
}

// TestMismatchActivity: reported by and initiated by the client's peer,
// about the peer dialed, with both fingerprints, the port and the user.
func TestMismatchActivity(t *testing.T) {
	reporter := account.Peer{ID: "s", Name: "laptop", IP: netip.MustParseAddr("100.64.0.2"), UserID: "u1"}
	dialed := account.Peer{ID: "t", Name: "db", IP: netip.MustParseAddr("100.64.0.1")}
	got := mismatchActivity(reporter, dialed, mismatch())
	want := map[string]string{"reported_by": "s", "source_peer_id": "s", "source_name": "laptop", "source_ip": "100.64.0.2",
		"name": "db", "ip": "100.64.0.1", "port": "22", "unix_user": "alice", "presented_key_fingerprint": fpA, "expected_key_fingerprint": fpB}
	if got.Activity != CodeHostKeyMismatch || got.Initiator != "s" || got.Target != "t" || !got.At.Equal(now) {
		t.Fatalf("got %+v", got)
	}
	for k, v := range want {
		if got.Meta[k] != v {
			t.Errorf("meta %s = %q, want %q", k, got.Meta[k], v)
		}
	}
	if len(got.Meta) != len(want) {
		t.Errorf("meta %v, want exactly %v", got.Meta, want)
	}
	if _, ok := account.Activities[CodeHostKeyMismatch]; !ok {
		t.Errorf("%s is not in account.Activities", CodeHostKeyMismatch)
	}
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name  string
		mut   func(*Event)
		field string // "" : valid
	}{
		{"start", func(*Event) {}, ""},
		{"refusal without kind or user", func(e *Event) { e.Type, e.Kind, e.User, e.Reason = Refused, KindNone, "", "no policy" }, ""},
		{"directory user", func(e *Event) { e.User = "bob@corp.example" }, ""},
		{"machine account", func(e *Event) { e.User = "host$" }, ""},
		{"end", func(e *Event) { e.Type, e.Duration = End, time.Hour }, ""},
		{"forward", func(e *Event) { e.Kind, e.Forward = RemoteForward, "127.0.0.1:8080" }, ""},
		{"skew within bounds", func(e *Event) { e.At = now.Add(4 * time.Minute) }, ""},
		{"type", func(e *Event) { e.Type = 0 }, "type"},
		{"no source", func(e *Event) { e.Source = netip.Addr{} }, "source_ip"},
		{"zoned source", func(e *Event) { e.Source = netip.MustParseAddr("fe80::1%eth0") }, "source_ip"},
		{"user dash", func(e *Event) { e.User = "-oProxyCommand" }, "unix_user"},
		{"user dollar only", func(e *Event) { e.User = "$" }, "unix_user"},
		{"user long", func(e *Event) { e.User = strings.Repeat("u", MaxUser+1) }, "unix_user"},
		{"user unicode", func(e *Event) { e.User = "alicé" }, "unix_user"},
		{"kind", func(e *Event) { e.Kind = RemoteForward + 1 }, "kind"},
		{"start without kind", func(e *Event) { e.Kind = KindNone }, "kind"},
		{"refusal without reason", func(e *Event) { e.Type = Refused }, "reason"},
		{"invalid utf8 reason", func(e *Event) { e.Type, e.Reason = Refused, "\xff" }, "reason"},
		{"reason long", func(e *Event) { e.Type, e.Reason = Refused, strings.Repeat("r", MaxReason+1) }, "reason"},
		{"old", func(e *Event) { e.At = now.Add(-MaxAge - time.Second) }, "at"},
		{"future", func(e *Event) { e.At = now.Add(MaxSkew + time.Second) }, "at"},
		{"zero time", func(e *Event) { e.At = time.Time{} }, "at"},
		{"negative duration", func(e *Event) { e.Type, e.Duration = End, -time.Second }, "duration"},
		{"forward on exec", func(e *Event) { e.Kind, e.Forward = Exec, "a:1" }, "forward"},
		{"jwt user", func(e *Event) { e.JWTUser = "google-oauth2|1234" }, ""},
		{"jwt user long", func(e *Event) { e.JWTUser = strings.Repeat("u", MaxJWTUser+1) }, "jwt_user"},
		{"jwt user control", func(e *Event) { e.JWTUser = "u\x1b[31m" }, "jwt_user"},
		{"jwt user space", func(e *Event) { e.JWTUser = "a b" }, "jwt_user"},
		{"forward long", func(e *Event) { e.Kind, e.Forward = LocalForward, strings.Repeat("h", MaxForward+1) }, "forward"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := good()
			tc.mut(&e)
			err := Check(e, now)
			switch {
			case tc.field == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.field != "" && (!errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.field)):
				t.Fatalf("got %v, want ErrInvalid naming %s", err, tc.field)
			}
		})
	}
	batch := make([]Event, MaxBatch+1)
	for i := range batch {
		batch[i] = good()
	}
	if err := CheckBatch(batch, now); !errors.Is(err, ErrInvalid) {
		t.Fatalf("%d events: %v", len(batch), err)
	}
	batch[3].User = "a b"
	if err := CheckBatch(batch[:10], now); err == nil || !strings.Contains(err.Error(), "events[3]") {
		t.Fatalf("bad fourth event: %v", err)
	}
}

// TestLimiter: a reporter gets Burst events at once, then one per Every;
// a report is taken whole or not at all; the table of reporters stays
// bounded, forgetting idle ones first.
func TestLimiter(t *testing.T) {
	clock := now
	l := newLimiter(10, time.Second, 2, func() time.Time { return clock })
	if !l.take("a", 8) || l.take("a", 3) || !l.take("a", 2) || l.take("a", 1) {
		t.Fatal("burst of 10 not honoured")
	}
	clock = clock.Add(3 * time.Second)
	if !l.take("a", 3) || l.take("a", 1) {
		t.Fatal("refill of one per second not honoured")
	}
	if !l.take("b", 10) {
		t.Fatal("second reporter refused")
	}
	if l.take("c", 1) {
		t.Fatal("a third reporter got in while the table is full of busy ones")
	}
	clock = clock.Add(time.Minute) // a and b are idle (full) again
	if !l.take("c", 1) {
		t.Fatal("idle reporters were not forgotten")
	}
	if len(l.buckets) > 2 {
		t.Fatalf("%d buckets, bound 2", len(l.buckets))
	}
}

// TestLimiterFullIsCheap: with the table full of busy reporters, each
// new reporter is refused after looking at one bucket (the least recently
// used), not at all of them; once that one is idle it makes room.
func TestLimiterFullIsCheap(t *testing.T) {
	clock := now
	const n = 10_000
	l := newLimiter(10, time.Second, n, func() time.Time { return clock })
	for i := range n {
		if !l.take(strconv.Itoa(i), 10) {
			t.Fatalf("reporter %d refused with room left", i)
		}
	}
	start := time.Now()
	for i := range 10_000 {
		if l.take("new"+strconv.Itoa(i), 1) {
			t.Fatal("a new reporter got in while every bucket is busy")
		}
	}
	// A scan of the table per new key costs ~10,000 x 10,000 steps
	// (seconds); a look at one bucket, microseconds each.
	if el := time.Since(start); el > time.Second {
		t.Errorf("10,000 refusals of new reporters took %v: the full table is scanned", el)
	}
	clock = clock.Add(9 * time.Second) // none refilled yet (10 s)
	if l.take("late", 1) {
		t.Fatal("a new reporter got in before any bucket refilled")
	}
	if !l.take("0", 1) { // 0 used again: it is no longer the least recent
		t.Fatal("reporter 0 refused after 9 s")
	}
	clock = clock.Add(2 * time.Second)
	if !l.take("late", 1) {
		t.Fatal("an idle reporter was not forgotten")
	}
	if _, ok := l.buckets["1"]; ok {
		t.Fatal("forgot a bucket other than the least recently used one (1)")
	}
	if _, ok := l.buckets["0"]; !ok || len(l.buckets) != n {
		t.Fatalf("%d buckets (0 kept: %v), want %d", len(l.buckets), ok, n)
	}
}

// TestActivity: the initiator is the source peer, or the user who added
// it through SSO; the meta says who, from where, as whom, and why.
func TestActivity(t *testing.T) {
	target := account.Peer{ID: "t", Name: "db", IP: netip.MustParseAddr("100.64.0.1")}
	src := account.Peer{ID: "s", Name: "laptop", IP: netip.MustParseAddr("100.64.0.2")}
	e := good()
	e.Type, e.Kind, e.Reason = Refused, KindNone, "user root: logging in as root is disabled"
	e.User = "root"
	got := activity(target, src, e, false)
	if got.Meta["reported_by"] != "t" {
		t.Fatalf("reported_by: %v", got.Meta)
	}
	if got.Activity != CodeRefused || got.Initiator != "s" || got.Target != "t" || got.Meta["reason"] != e.Reason || got.Meta["unix_user"] != "root" || got.Meta["source_name"] != "laptop" {
		t.Fatalf("got %+v", got)
	}
	if _, ok := got.Meta["kind"]; ok {
		t.Fatalf("a refusal before any channel has a kind: %v", got.Meta)
	}
	// The source peer's owner is not who did it: the target cannot
	// vouch for who sat at the source peer.
	src.UserID = "u1"
	if got := activity(target, src, good(), false); got.Initiator != "s" || got.Meta["source_peer_id"] != "s" || got.Activity != CodeStart {
		t.Fatalf("SSO peer: got %+v", got)
	}
	// A token login: the token's user, if the account has it.
	e = good()
	e.JWTUser = "u2"
	if got := activity(target, src, e, true); got.Initiator != "u2" || got.Meta["jwt_user"] != "u2" || got.Meta["reported_by"] != "t" {
		t.Fatalf("token login: got %+v", got)
	}
	if got := activity(target, src, e, false); got.Initiator != "s" || got.Meta["jwt_user"] != "" || got.Meta["jwt_user_refused"] == "" {
		t.Fatalf("token user not of the account: got %+v", got)
	}
	for _, c := range []string{CodeStart, CodeEnd, CodeRefused, CodeDropped} {
		if _, ok := account.Activities[c]; !ok {
			t.Errorf("%s is not in account.Activities", c)
		}
	}
}
