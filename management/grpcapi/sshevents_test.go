package grpcapi

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/management/sshaudit"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// TestSSHEventsStrangerGetsNoBucket: reports sealed with keys no peer
// has are refused without a place in the reporters' limiter, so fresh
// keys cannot fill its table and lock real reporters out.
func TestSSHEventsStrangerGetsNoBucket(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, store.Config{Engine: store.SQLite, DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	sk, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	rec := sshaudit.New(sshaudit.Options{Store: st, Now: func() time.Time { return now }})
	s := New(Options{Store: st, ServerKey: sk, SSHAudit: rec, Log: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }})
	t.Cleanup(s.Close)
	for i := range 50 {
		pk, err := key.NewPrivate()
		if err != nil {
			t.Fatal(err)
		}
		body, err := envelope.NewShared(pk, sk.Public()).SealProto(&mgmtpb.WiremeshSSHEventsRequest{Events: []*mgmtpb.WiremeshSSHEvent{{
			Type: mgmtpb.WiremeshSSHEvent_SESSION_START, Kind: mgmtpb.WiremeshSSHEvent_SHELL, SourceIp: "100.64.0.2", At: timestamppb.New(now)}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.WiremeshSSHEvents(ctx, &mgmtpb.EncryptedMessage{WgPubKey: pk.Public().String(), Body: body})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("stranger %d: got %v, want PermissionDenied", i, err)
		}
	}
	if n := rec.Reporters(); n != 0 {
		t.Fatalf("%d reporters remembered after strangers only, want 0", n)
	}
}
