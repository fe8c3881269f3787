package grpcapi

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/management/sshaudit"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// SSH event reports (WiremeshSSHEvents, docs/extensions.md): our agents
// report sessions on their SSH server and refused attempts, for the
// activity log. NetBird's protocol has no such method; its server answers
// Unimplemented, and official clients never call it.

// maxSSHEventsBody bounds a sealed report before it is opened: a full
// batch of events at their largest fits with room to spare.
const maxSSHEventsBody = 96 << 10

// WiremeshSSHEvents records a batch of SSH events of the calling peer's
// SSH server. The report is checked whole before anything is written: a
// bad field refuses all of it (InvalidArgument, naming the field), a
// registered peer past its allowance is refused (ResourceExhausted)
// before the report is checked or anything is written; a key no peer has
// is refused (PermissionDenied) without taking a place in the limiter.
func (s *Server) WiremeshSSHEvents(ctx context.Context, req *mgmtpb.EncryptedMessage) (*mgmtpb.Empty, error) {
	if s.o.SSHAudit == nil {
		return nil, status.Error(codes.Unimplemented, "SSH event reports are not recorded by this server")
	}
	if len(req.GetBody()) > maxSSHEventsBody {
		return nil, status.Errorf(codes.InvalidArgument, "SSH event report of %d bytes: at most %d", len(req.GetBody()), maxSSHEventsBody)
	}
	var r mgmtpb.WiremeshSSHEventsRequest
	pk, _, err := s.open(req, &r)
	if err != nil {
		return nil, err
	}
	if n := len(r.GetEvents()); n > sshaudit.MaxBatch {
		return nil, status.Errorf(codes.InvalidArgument, "events: %d in one report, at most %d", n, sshaudit.MaxBatch)
	}
	// The peer first: only a registered peer gets a bucket in the
	// limiter (sshaudit.Recorder.Admit).
	p, err := s.registeredPeer(ctx, pk)
	if err != nil {
		return nil, err
	}
	if err := s.o.SSHAudit.Admit(p.ID, len(r.GetEvents())); err != nil {
		return nil, status.Error(codes.ResourceExhausted, err.Error())
	}
	evs, err := sshEventsFrom(&r, s.o.Now())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	n, err := s.o.SSHAudit.Record(ctx, p, evs, r.GetDropped())
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return nil, status.Error(codes.Unavailable, "management store temporarily unavailable, retry")
	case err != nil:
		s.o.Log.ErrorContext(ctx, "recording SSH events", "peer", p.ID, "err", err)
		return nil, status.Error(codes.Internal, "recording SSH events failed")
	}
	if n < len(evs) {
		s.o.Log.DebugContext(ctx, "SSH events from sources that are no peer of the account left out", "peer", p.ID, "reported", len(evs), "written", n)
	}
	return &mgmtpb.Empty{}, nil
}

// sshEventsFrom converts a report at the boundary and checks every field
// (sshaudit.CheckBatch).
func sshEventsFrom(r *mgmtpb.WiremeshSSHEventsRequest, now time.Time) ([]sshaudit.Event, error) {
	in := r.GetEvents()
	if len(in) > sshaudit.MaxBatch {
		return nil, fmt.Errorf("%w: %d events, at most %d per report", sshaudit.ErrInvalid, len(in), sshaudit.MaxBatch)
	}
	out := make([]sshaudit.Event, 0, len(in))
	for i, e := range in {
		var t sshaudit.Type
		switch e.GetType() {
		case mgmtpb.WiremeshSSHEvent_SESSION_START:
			t = sshaudit.Start
		case mgmtpb.WiremeshSSHEvent_SESSION_END:
			t = sshaudit.End
		case mgmtpb.WiremeshSSHEvent_REFUSED:
			t = sshaudit.Refused
		case mgmtpb.WiremeshSSHEvent_HOST_KEY_MISMATCH:
			t = sshaudit.HostKeyMismatch
		default:
			return nil, fmt.Errorf("events[%d]: %w: type %v unknown", i, sshaudit.ErrInvalid, e.GetType())
		}
		k := sshaudit.Kind(e.GetKind())
		if e.GetKind() < 0 || e.GetKind() > mgmtpb.WiremeshSSHEvent_REMOTE_FORWARD {
			return nil, fmt.Errorf("events[%d]: %w: kind %v unknown", i, sshaudit.ErrInvalid, e.GetKind())
		}
		// A host key mismatch has no source address (the reporter is
		// the source): sshaudit.Check refuses one that has.
		var src netip.Addr
		if e.GetSourceIp() != "" || t != sshaudit.HostKeyMismatch {
			a, err := netip.ParseAddr(e.GetSourceIp())
			if err != nil {
				return nil, fmt.Errorf("events[%d]: %w: source_ip %q is not an IP address", i, sshaudit.ErrInvalid, truncate(e.GetSourceIp(), 64))
			}
			src = a.Unmap()
		}
		var dst netip.Addr
		if e.GetTargetIp() != "" {
			a, err := netip.ParseAddr(e.GetTargetIp())
			if err != nil {
				return nil, fmt.Errorf("events[%d]: %w: target_ip %q is not an IP address", i, sshaudit.ErrInvalid, truncate(e.GetTargetIp(), 64))
			}
			dst = a.Unmap()
		}
		if e.GetTargetPort() > 65535 {
			return nil, fmt.Errorf("events[%d]: %w: target_port %d is not a port", i, sshaudit.ErrInvalid, e.GetTargetPort())
		}
		if e.GetAt() == nil || e.GetAt().CheckValid() != nil {
			return nil, fmt.Errorf("events[%d]: %w: at is missing or not a valid time", i, sshaudit.ErrInvalid)
		}
		if e.GetDurationMillis() > uint64(sshaudit.MaxDuration/time.Millisecond) {
			return nil, fmt.Errorf("events[%d]: %w: duration_millis %d over %v", i, sshaudit.ErrInvalid, e.GetDurationMillis(), sshaudit.MaxDuration)
		}
		out = append(out, sshaudit.Event{Type: t, Source: src, User: e.GetUnixUser(), Kind: k, Reason: e.GetReason(),
			At: e.GetAt().AsTime(), Duration: time.Duration(e.GetDurationMillis()) * time.Millisecond, Session: e.GetSessionId(),
			PTY: e.GetPty(), Forward: e.GetForward(), JWTUser: e.GetJwtUser(),
			Target: dst, Port: uint16(e.GetTargetPort()), Presented: e.GetPresentedKeyFingerprint(), Expected: e.GetExpectedKeyFingerprint()})
	}
	if err := sshaudit.CheckBatch(out, now); err != nil {
		return nil, err
	}
	return out, nil
}

// truncate shortens hostile input quoted back in an error.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
