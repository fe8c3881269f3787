package grpcapi

import (
	"net/netip"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wiremesh/wiremesh/management/sshaudit"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// fuzzNow is the server clock of FuzzSSHEvents; its seeds
// (testdata/fuzz/FuzzSSHEvents) carry times around it.
var fuzzNow = time.Date(2026, 12, 5, 8, 0, 0, 0, time.UTC)

// FuzzSSHEvents: whatever a peer seals into WiremeshSSHEvents, the decoder
// either refuses it whole or yields one event per reported event, each
// carrying exactly what was reported (re-encoded, it is the report's
// event again; as many of each type) and within the bounds
// docs/extensions.md gives, checked here on their own terms rather than
// by the decoder's own checks.
func FuzzSSHEvents(f *testing.F) {
	f.Fuzz(func(t *testing.T, b []byte) {
		var r mgmtpb.WiremeshSSHEventsRequest
		if proto.Unmarshal(b, &r) != nil {
			return
		}
		evs, err := sshEventsFrom(&r, fuzzNow)
		if err != nil {
			if len(evs) != 0 {
				t.Fatalf("refused report yielded %d events", len(evs))
			}
			return
		}
		in := r.GetEvents()
		if len(evs) > 64 || len(evs) != len(in) {
			t.Fatalf("%d events from a report of %d", len(evs), len(in))
		}
		perType := map[mgmtpb.WiremeshSSHEvent_Type]int{}
		for _, e := range in {
			perType[e.GetType()]++
		}
		for i, e := range evs {
			back := toWire(e)
			perType[back.GetType()]--
			// The source (the target, for a host key mismatch, which has
			// no source) is the one address reported (a v4-mapped one as
			// plain v4); the rest is what was sent, bit for bit.
			want := proto.Clone(in[i]).(*mgmtpb.WiremeshSSHEvent)
			addr, field := in[i].GetSourceIp(), &want.SourceIp
			if e.Type == sshaudit.HostKeyMismatch {
				addr, field = in[i].GetTargetIp(), &want.TargetIp
				if in[i].GetSourceIp() != "" || e.Source.IsValid() {
					t.Fatalf("event %d: host key mismatch with source_ip %q", i, in[i].GetSourceIp())
				}
			} else if e.Target.IsValid() || e.Port != 0 || e.Presented != "" || e.Expected != "" {
				t.Fatalf("event %d: type %v with a host key mismatch's fields", i, e.Type)
			}
			if a, err := netip.ParseAddr(addr); err != nil || a.Unmap().String() != back.SourceIp+back.TargetIp {
				t.Fatalf("event %d: address %q accepted as %s%s", i, addr, back.SourceIp, back.TargetIp)
			}
			*field = back.SourceIp + back.TargetIp
			// Fields this version does not know are not carried.
			want.ProtoReflect().SetUnknown(nil)
			if want.At != nil {
				want.At.ProtoReflect().SetUnknown(nil)
			}
			if !proto.Equal(back, want) {
				t.Fatalf("event %d: reported %v, accepted as %v", i, in[i], back)
			}
			if a := e.Source; e.Type == sshaudit.HostKeyMismatch {
				a = e.Target
				if e.Port == 0 || e.Presented == e.Expected || !fingerprintText(e.Presented) || !fingerprintText(e.Expected) || e.Kind != sshaudit.KindNone || e.Session != 0 {
					t.Fatalf("event %d: host key mismatch %+v", i, e)
				}
				if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
					t.Fatalf("event %d: address %v", i, a)
				}
			} else if !a.IsValid() || a.Is4In6() || a.Zone() != "" {
				t.Fatalf("event %d: source %v", i, a)
			}
			if len(e.User) > 64 || strings.HasPrefix(e.User, "-") || strings.IndexFunc(e.User, func(r rune) bool {
				return !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("._-@$", r)))
			}) >= 0 {
				t.Fatalf("event %d: unix_user %q", i, e.User)
			}
			if len(e.Reason) > 256 || len(e.Forward) > 262 || !printableText(e.Reason) || !printableText(e.Forward) || strings.Contains(e.Forward, " ") {
				t.Fatalf("event %d: reason %q, forward %q", i, e.Reason, e.Forward)
			}
			if (e.Type == sshaudit.Refused) != (e.Reason != "") {
				t.Fatalf("event %d: type %v with reason %q", i, e.Type, e.Reason)
			}
			if e.Duration != 0 && e.Type != sshaudit.End || e.Duration > 366*24*time.Hour {
				t.Fatalf("event %d: type %v lasting %v", i, e.Type, e.Duration)
			}
			if e.At.Before(fuzzNow.Add(-7*24*time.Hour)) || e.At.After(fuzzNow.Add(5*time.Minute)) {
				t.Fatalf("event %d at %v", i, e.At)
			}
		}
		for typ, n := range perType {
			if n != 0 {
				t.Fatalf("type %v: %d more reported than accepted", typ, n)
			}
		}
	})
}

// toWire is the inverse of sshEventsFrom's conversion of one event,
// written independently of it.
func toWire(e sshaudit.Event) *mgmtpb.WiremeshSSHEvent {
	types := map[sshaudit.Type]mgmtpb.WiremeshSSHEvent_Type{sshaudit.Start: mgmtpb.WiremeshSSHEvent_SESSION_START,
		sshaudit.End: mgmtpb.WiremeshSSHEvent_SESSION_END, sshaudit.Refused: mgmtpb.WiremeshSSHEvent_REFUSED,
		sshaudit.HostKeyMismatch: mgmtpb.WiremeshSSHEvent_HOST_KEY_MISMATCH}
	kinds := map[sshaudit.Kind]mgmtpb.WiremeshSSHEvent_Kind{sshaudit.KindNone: mgmtpb.WiremeshSSHEvent_KIND_UNKNOWN,
		sshaudit.Shell: mgmtpb.WiremeshSSHEvent_SHELL, sshaudit.Exec: mgmtpb.WiremeshSSHEvent_EXEC, sshaudit.SFTP: mgmtpb.WiremeshSSHEvent_SFTP,
		sshaudit.LocalForward: mgmtpb.WiremeshSSHEvent_LOCAL_FORWARD, sshaudit.RemoteForward: mgmtpb.WiremeshSSHEvent_REMOTE_FORWARD}
	typ, ok := types[e.Type]
	if !ok {
		typ = -1 // never equal to a reported type
	}
	kind, ok := kinds[e.Kind]
	if !ok {
		kind = -1
	}
	w := &mgmtpb.WiremeshSSHEvent{Type: typ, Kind: kind, UnixUser: e.User, Reason: e.Reason,
		At: timestamppb.New(e.At), DurationMillis: uint64(e.Duration / time.Millisecond), SessionId: e.Session, Pty: e.PTY, Forward: e.Forward,
		JwtUser: e.JWTUser, TargetPort: uint32(e.Port), PresentedKeyFingerprint: e.Presented, ExpectedKeyFingerprint: e.Expected}
	if e.Source.IsValid() {
		w.SourceIp = e.Source.String()
	}
	if e.Target.IsValid() {
		w.TargetIp = e.Target.String()
	}
	return w
}

// fingerprintText: "SHA256:" and 43 characters of unpadded base64.
func fingerprintText(s string) bool {
	b64, ok := strings.CutPrefix(s, "SHA256:")
	return ok && len(b64) == 43 && strings.Trim(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") == ""
}

func printableText(s string) bool {
	return utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0
}
