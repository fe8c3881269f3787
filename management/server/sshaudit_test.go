package server_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestSSHEventReports: an agent's SSH events (WiremeshSSHEvents) reach
// GET /api/events with NetBird-style codes and texts, initiated by the
// source peer and about the reporting peer; sources that are not another
// peer of the account are left out; a report with any bad field, from an
// unregistered key, or past the reporter's allowance writes nothing.
func TestSSHEventReports(t *testing.T) { engines.Each(t, testSSHEventReports) }

func testSSHEventReports(t *testing.T, eng storetest.Engine) {
	e, o := ownerAPI(t, eng)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key := obj(o.call("POST", "/api/setup-keys", map[string]any{"name": "k", "type": "reusable", "expires_in": 86400, "auto_groups": []string{}, "usage_limit": 0}, 200))["key"].(string)
	target, source := testpeer.New(e.conn, "target"), testpeer.New(e.conn, "source")
	for _, p := range []*testpeer.Peer{target, source} {
		if _, err := p.Login(ctx, key); err != nil {
			t.Fatal(err)
		}
	}
	ids, ips := map[string]string{}, map[string]string{}
	for _, p := range list(o.call("GET", "/api/peers", nil, 200)) {
		ids[obj(p)["name"].(string)], ips[obj(p)["name"].(string)] = obj(p)["id"].(string), obj(p)["ip"].(string)
	}
	client := mgmtpb.NewManagementServiceClient(e.conn)
	report := func(p *testpeer.Peer, r *mgmtpb.WiremeshSSHEventsRequest) error {
		m, _, err := p.Seal(ctx, r)
		if err != nil {
			t.Fatal(err)
		}
		_, err = client.WiremeshSSHEvents(ctx, m)
		return err
	}
	sshEvents := func() []map[string]any {
		var out []map[string]any
		for _, ev := range list(o.call("GET", "/api/events", nil, 200)) {
			if strings.HasPrefix(obj(ev)["activity_code"].(string), "peer.ssh.") && obj(ev)["activity_code"] != "peer.ssh.enable" {
				out = append(out, obj(ev))
			}
		}
		return out
	}
	now := time.Now()
	ev := func(typ mgmtpb.WiremeshSSHEvent_Type, kind mgmtpb.WiremeshSSHEvent_Kind, src string) *mgmtpb.WiremeshSSHEvent {
		e := &mgmtpb.WiremeshSSHEvent{Type: typ, Kind: kind, SourceIp: src, UnixUser: "alice", At: timestamppb.New(now), SessionId: 7}
		switch typ {
		case mgmtpb.WiremeshSSHEvent_SESSION_END:
			e.DurationMillis = 1500
		case mgmtpb.WiremeshSSHEvent_REFUSED:
			e.Reason = "no policy lets peer source reach this peer on tcp/22"
		}
		return e
	}
	start := ev(mgmtpb.WiremeshSSHEvent_SESSION_START, mgmtpb.WiremeshSSHEvent_SHELL, ips["source"])
	start.Pty = true

	// Bad input: each refuses its whole report, which also holds a good
	// event, and writes nothing.
	bad := map[string]func(*mgmtpb.WiremeshSSHEvent){
		"user with a space": func(e *mgmtpb.WiremeshSSHEvent) { e.UnixUser = "al ice" },
		"user too long":     func(e *mgmtpb.WiremeshSSHEvent) { e.UnixUser = strings.Repeat("a", 65) },
		"reason on a start": func(e *mgmtpb.WiremeshSSHEvent) { e.Reason = "x" },
		"control in reason": func(e *mgmtpb.WiremeshSSHEvent) { e.Type, e.Reason = mgmtpb.WiremeshSSHEvent_REFUSED, "a\x1b[31m" },
		"reason too long": func(e *mgmtpb.WiremeshSSHEvent) {
			e.Type, e.Reason = mgmtpb.WiremeshSSHEvent_REFUSED, strings.Repeat("r", 257)
		},
		"unknown type":          func(e *mgmtpb.WiremeshSSHEvent) { e.Type = 9 },
		"unknown kind":          func(e *mgmtpb.WiremeshSSHEvent) { e.Kind = 9 },
		"no kind on a start":    func(e *mgmtpb.WiremeshSSHEvent) { e.Kind = 0 },
		"source not an address": func(e *mgmtpb.WiremeshSSHEvent) { e.SourceIp = "peer-b" },
		"no time":               func(e *mgmtpb.WiremeshSSHEvent) { e.At = nil },
		"time a month ago":      func(e *mgmtpb.WiremeshSSHEvent) { e.At = timestamppb.New(now.Add(-30 * 24 * time.Hour)) },
		"time in the future":    func(e *mgmtpb.WiremeshSSHEvent) { e.At = timestamppb.New(now.Add(time.Hour)) },
		"duration on a start":   func(e *mgmtpb.WiremeshSSHEvent) { e.DurationMillis = 5 },
		"forward on a shell":    func(e *mgmtpb.WiremeshSSHEvent) { e.Forward = "10.0.0.1:80" },
		"duration over a year": func(e *mgmtpb.WiremeshSSHEvent) {
			e.Type, e.DurationMillis = mgmtpb.WiremeshSSHEvent_SESSION_END, 400*24*3600*1000
		},
		"forward with a newline": func(e *mgmtpb.WiremeshSSHEvent) { e.Kind, e.Forward = mgmtpb.WiremeshSSHEvent_LOCAL_FORWARD, "a\nb:1" },
	}
	for name, mut := range bad {
		b := ev(mgmtpb.WiremeshSSHEvent_SESSION_START, mgmtpb.WiremeshSSHEvent_EXEC, ips["source"])
		mut(b)
		err := report(target, &mgmtpb.WiremeshSSHEventsRequest{Events: []*mgmtpb.WiremeshSSHEvent{start, b}})
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: got %v, want InvalidArgument", name, err)
		}
	}
	many := make([]*mgmtpb.WiremeshSSHEvent, 65)
	for i := range many {
		many[i] = start
	}
	if err := report(target, &mgmtpb.WiremeshSSHEventsRequest{Events: many}); status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "at most 64") {
		t.Errorf("65 events: got %v, want InvalidArgument saying at most 64", err)
	}
	stranger := testpeer.New(e.conn, "stranger")
	if err := report(stranger, &mgmtpb.WiremeshSSHEventsRequest{Events: []*mgmtpb.WiremeshSSHEvent{start}}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("unregistered reporter: got %v, want PermissionDenied", err)
	}
	if got := sshEvents(); len(got) != 0 {
		t.Fatalf("refused reports wrote events: %v", got)
	}

	// A good report: sources that are no other peer of the account (an
	// unused address, the reporter itself) are left out.
	end := ev(mgmtpb.WiremeshSSHEvent_SESSION_END, mgmtpb.WiremeshSSHEvent_SHELL, ips["source"])
	refused := ev(mgmtpb.WiremeshSSHEvent_REFUSED, mgmtpb.WiremeshSSHEvent_KIND_UNKNOWN, ips["source"])
	refused.UnixUser = "root"
	fwd := ev(mgmtpb.WiremeshSSHEvent_SESSION_START, mgmtpb.WiremeshSSHEvent_LOCAL_FORWARD, ips["source"])
	fwd.Forward = "127.0.0.1:5432"
	ghost := ev(mgmtpb.WiremeshSSHEvent_REFUSED, mgmtpb.WiremeshSSHEvent_KIND_UNKNOWN, "100.64.255.254")
	self := ev(mgmtpb.WiremeshSSHEvent_SESSION_START, mgmtpb.WiremeshSSHEvent_EXEC, ips["target"])
	if err := report(target, &mgmtpb.WiremeshSSHEventsRequest{Events: []*mgmtpb.WiremeshSSHEvent{start, end, refused, fwd, ghost, self}, Dropped: 3}); err != nil {
		t.Fatal(err)
	}
	got := sshEvents()
	want := map[string]int{"peer.ssh.session.start": 2, "peer.ssh.session.end": 1, "peer.ssh.session.refused": 1, "peer.ssh.events.dropped": 1}
	counts := map[string]int{}
	for _, g := range got {
		code := g["activity_code"].(string)
		counts[code]++
		if g["activity"] != account.Activities[code] {
			t.Errorf("%s: activity %q, want %q", code, g["activity"], account.Activities[code])
		}
		if g["target_id"] != ids["target"] {
			t.Errorf("%s: target_id %v, want the reporting peer %s", code, g["target_id"], ids["target"])
		}
		meta := obj(g["meta"])
		if code == "peer.ssh.events.dropped" {
			if meta["dropped"] != "3" {
				t.Errorf("dropped: meta %v, want dropped 3", meta)
			}
			continue
		}
		if g["initiator_id"] != ids["source"] || meta["source_ip"] != ips["source"] || meta["source_name"] != "source" {
			t.Errorf("%s: initiator %v, meta %v; want the source peer %s (%s)", code, g["initiator_id"], meta, ids["source"], ips["source"])
		}
		switch {
		case code == "peer.ssh.session.refused":
			if meta["unix_user"] != "root" || meta["reason"] != refused.Reason {
				t.Errorf("refused: meta %v", meta)
			}
		case code == "peer.ssh.session.end":
			if meta["duration_ms"] != "1500" || meta["kind"] != "shell" || meta["session"] != "7" {
				t.Errorf("end: meta %v", meta)
			}
		case meta["kind"] == "local_forward":
			if meta["forward"] != "127.0.0.1:5432" {
				t.Errorf("forward: meta %v", meta)
			}
		case meta["kind"] != "shell" || meta["pty"] != "true" || meta["unix_user"] != "alice":
			t.Errorf("start: meta %v", meta)
		}
	}
	for code, n := range want {
		if counts[code] != n {
			t.Errorf("%d %s events, want %d (all: %v)", counts[code], code, n, counts)
		}
	}

	// A token login: the target names the token's user. One of the
	// account's users is the initiator; any other name is not taken (a
	// hostile target cannot blame a user of another account, or a made-up
	// one), and the event still says the target reported it.
	owner := obj(o.call("GET", "/api/users/current", nil, 200))["id"].(string)
	tok := ev(mgmtpb.WiremeshSSHEvent_SESSION_START, mgmtpb.WiremeshSSHEvent_SHELL, ips["source"])
	tok.SessionId, tok.JwtUser = 8, owner
	forged := ev(mgmtpb.WiremeshSSHEvent_SESSION_START, mgmtpb.WiremeshSSHEvent_SHELL, ips["source"])
	forged.SessionId, forged.JwtUser = 9, "someone-else"
	if err := report(target, &mgmtpb.WiremeshSSHEventsRequest{Events: []*mgmtpb.WiremeshSSHEvent{tok, forged}}); err != nil {
		t.Fatal(err)
	}
	for _, g := range sshEvents() {
		meta := obj(g["meta"])
		if meta["reported_by"] != ids["target"] && g["activity_code"] != "peer.ssh.events.dropped" {
			t.Errorf("%v: meta %v, want reported_by %s", g["activity_code"], meta, ids["target"])
		}
		switch meta["session"] {
		case "8":
			if g["initiator_id"] != owner || meta["jwt_user"] != owner {
				t.Errorf("token login: initiator %v, meta %v; want the token's user %s", g["initiator_id"], meta, owner)
			}
		case "9":
			if g["initiator_id"] != ids["source"] || meta["jwt_user"] != nil || meta["jwt_user_refused"] == nil {
				t.Errorf("unknown token user: initiator %v, meta %v; want the source peer and jwt_user_refused", g["initiator_id"], meta)
			}
		}
	}

	// The allowance: 120 events at once, then one a second: of two full
	// reports at once from a fresh reporter, the second is refused whole.
	before := len(sshEvents())
	full := make([]*mgmtpb.WiremeshSSHEvent, 64)
	for i := range full {
		full[i] = ev(mgmtpb.WiremeshSSHEvent_SESSION_START, mgmtpb.WiremeshSSHEvent_EXEC, ips["target"])
	}
	if err := report(source, &mgmtpb.WiremeshSSHEventsRequest{Events: full}); err != nil {
		t.Fatal(err)
	}
	if err := report(source, &mgmtpb.WiremeshSSHEventsRequest{Events: full}); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("second full report at once: got %v, want ResourceExhausted", err)
	}
	if after := len(sshEvents()); after != before+64 {
		t.Errorf("events went from %d to %d, want +64 (the first report only)", before, after)
	}
}
