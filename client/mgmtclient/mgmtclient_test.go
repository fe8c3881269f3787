package mgmtclient

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// syncServer records the first SyncRequest it is sent.
type syncServer struct {
	mgmtpb.UnimplementedManagementServiceServer
	priv key.Private
	got  chan *mgmtpb.SyncRequest
}

func (s *syncServer) GetServerKey(context.Context, *mgmtpb.Empty) (*mgmtpb.ServerKeyResponse, error) {
	return &mgmtpb.ServerKeyResponse{Key: s.priv.Public().String()}, nil
}

func (s *syncServer) Sync(m *mgmtpb.EncryptedMessage, st grpc.ServerStreamingServer[mgmtpb.EncryptedMessage]) error {
	peer, err := key.ParsePublic(m.GetWgPubKey())
	if err != nil {
		return err
	}
	var req mgmtpb.SyncRequest
	if err := envelope.NewShared(s.priv, peer).OpenProto(m.GetBody(), &req); err != nil {
		return err
	}
	s.got <- &req
	<-st.Context().Done()
	return nil
}

// The server sends jobs only to agents that announce they upload bundles.
func TestSyncAnnouncesCapabilities(t *testing.T) {
	srvPriv, _ := key.NewPrivate()
	priv, _ := key.NewPrivate()
	s := &syncServer{priv: srvPriv, got: make(chan *mgmtpb.SyncRequest, 1)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g := grpc.NewServer()
	mgmtpb.RegisterManagementServiceServer(g, s)
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()
	target, err := ParseURL("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c, err := Dial(target, priv, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Sync(ctx, &mgmtpb.PeerSystemMeta{Hostname: "h"}, func(*mgmtpb.SyncResponse) {}) }()
	select {
	case req := <-s.got:
		caps := req.GetWiremeshCapabilities()
		if !caps.GetDebugBundleUpload() || !caps.GetNetworkMapDeltas() || !caps.GetDerivedPeerDNS() {
			t.Errorf("capabilities %v: want debugBundleUpload, networkMapDeltas and derivedPeerDNS", caps)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no SyncRequest")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Sync = %v", err)
	}
}
