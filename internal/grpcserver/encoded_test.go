package grpcserver_test

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// encodedServer sends one Encoded message (and then a plain one) on Sync
// and reports when the transport released the first.
type encodedServer struct {
	mgmtpb.UnimplementedManagementServiceServer
	wire     []byte
	released chan struct{}
}

func (s *encodedServer) Sync(_ *mgmtpb.EncryptedMessage, st grpc.ServerStreamingServer[mgmtpb.EncryptedMessage]) error {
	if err := st.SendMsg(grpcserver.NewEncoded(s.wire, func() { close(s.released) })); err != nil {
		return err
	}
	if err := st.Send(&mgmtpb.EncryptedMessage{WgPubKey: "plain"}); err != nil {
		return err
	}
	<-st.Context().Done()
	return nil
}

// An Encoded message goes out as it is, and is released only once the
// client has read it: not while HTTP/2 flow control holds it back.
func TestEncodedReleasedWhenWritten(t *testing.T) {
	want := &mgmtpb.EncryptedMessage{WgPubKey: "k", Body: bytes.Repeat([]byte("x"), 1<<20)}
	wire, err := proto.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	srv := &encodedServer{wire: wire, released: make(chan struct{})}
	g := grpcserver.New()
	mgmtpb.RegisterManagementServiceServer(g, srv)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.Serve(ln) }()
	defer g.Stop()
	// A fixed 64 KiB window (no BDP growth): the 1 MiB message cannot be
	// written out before the client reads.
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := mgmtpb.NewManagementServiceClient(conn).Sync(ctx, &mgmtpb.EncryptedMessage{})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-srv.released:
		t.Fatal("released before the client read the message")
	case <-time.After(300 * time.Millisecond):
	}
	got, err := st.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatal("the message arrived changed")
	}
	select {
	case <-srv.released:
	case <-ctx.Done():
		t.Fatal("not released after the client read it")
	}
	if got, err := st.Recv(); err != nil || got.GetWgPubKey() != "plain" {
		t.Fatalf("plain message after it: %v, %v", got, err)
	}
}

// A small Encoded message (gRPC copies those) is released at once, and the
// release runs once however often it is asked for.
func TestEncodedReleaseOnce(t *testing.T) {
	n := 0
	e := grpcserver.NewEncoded([]byte{1}, func() { n++ })
	e.Release()
	e.Release()
	if n != 1 {
		t.Fatalf("released %d times", n)
	}
}
