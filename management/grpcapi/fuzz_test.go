package grpcapi_test

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/tenant"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// startManagement runs the whole management server on loopback and returns
// a client connection and a reusable setup key.
func startManagement(t testing.TB) (*grpc.ClientConn, string) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := server.Open(ctx, server.Options{Store: store.Config{Engine: store.SQLite, DataDir: t.TempDir()}, Log: log,
		Advertise: server.Advertiser{SignalPort: ln.Addr().(*net.TCPAddr).Port}, JobFirstMessage: time.Second})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	g := grpcserver.New()
	srv.Register(g)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcserver.Serve(ctx, ln, g, http.NotFoundHandler(), log, time.Second)
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(); srv.API.Close(); cancel(); <-done; srv.Close() })
	acc, err := tenant.Default(ctx, srv.Store, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	k, secret, err := setupkey.New(acc.ID, setupkey.Options{Reusable: true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Store.Tx(ctx, func(tx *store.Tx) error { return tx.In(k.AccountID).InsertSetupKey(ctx, k) }); err != nil {
		t.Fatal(err)
	}
	return conn, secret
}

// serverFault reports whether err is the server failing rather than
// refusing: a bad message must get a clear refusal, never Internal/Unknown.
func serverFault(err error) bool {
	switch status.Code(err) {
	case codes.Internal, codes.Unknown, codes.DataLoss, codes.Unimplemented:
		return true
	}
	return false
}

// FuzzDecryptedRequests seals arbitrary bytes to the server key as a
// registered peer (or a new one), so the fuzzer reaches the protobuf parse
// of LoginRequest, SyncRequest and JobRequest and the handlers behind it.
// Whatever the plaintext, the server answers or refuses (never Internal or
// Unknown) and keeps serving.
func FuzzDecryptedRequests(f *testing.F) {
	conn, secret := startManagement(f)
	client := mgmtpb.NewManagementServiceClient(conn)
	ctx := context.Background()
	known := testpeer.New(conn, "known")
	if _, err := known.Login(ctx, secret); err != nil {
		f.Fatal(err)
	}
	fresh := testpeer.New(conn, "fresh")
	login, _ := proto.Marshal(&mgmtpb.LoginRequest{SetupKey: secret, Meta: known.Meta()})
	syncReq, _ := proto.Marshal(&mgmtpb.SyncRequest{Meta: known.Meta()})
	job, _ := proto.Marshal(&mgmtpb.JobRequest{ID: []byte("x")})
	for _, seed := range []struct {
		rpc   uint8
		known bool
		raw   []byte
	}{
		{0, true, login}, {0, false, login}, {1, true, syncReq}, {2, true, job},
		{0, false, []byte{0x0a, 0xff, 0xff, 0xff, 0x0f}}, {1, true, []byte{}}, {2, false, []byte{0x12, 0x01}},
	} {
		f.Add(seed.rpc, seed.known, seed.raw)
	}
	f.Fuzz(func(t *testing.T, rpc uint8, asKnown bool, raw []byte) {
		p := fresh
		if asKnown {
			p = known
		}
		body, err := p.SealBytes(ctx, raw)
		if err != nil {
			t.Fatal(err)
		}
		req := &mgmtpb.EncryptedMessage{WgPubKey: p.Public().String(), Body: body}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		switch rpc % 3 {
		case 0:
			_, err = client.Login(cctx, req)
		case 1:
			var st grpc.ServerStreamingClient[mgmtpb.EncryptedMessage]
			if st, err = client.Sync(cctx, req); err == nil {
				_, err = st.Recv()
			}
		case 2:
			var st grpc.BidiStreamingClient[mgmtpb.EncryptedMessage, mgmtpb.EncryptedMessage]
			if st, err = client.Job(cctx); err == nil {
				if err = st.Send(req); err == nil {
					jctx, jcancel := context.WithTimeout(cctx, 50*time.Millisecond)
					defer jcancel()
					go func() { <-jctx.Done(); cancel() }()
					_, err = st.Recv()
				}
			}
		}
		if serverFault(err) {
			t.Fatalf("rpc %d with %x: %v", rpc%3, raw, err)
		}
		// Still serving.
		if _, err := client.GetServerKey(cctx, &mgmtpb.Empty{}); err != nil && cctx.Err() == nil {
			t.Fatalf("server stopped answering: %v", err)
		}
	})
}

// overlongKey is 44 base64 characters that decode to 33 bytes: parsing it
// used to panic and take the whole process down.
const overlongKey = "rJCUs0hLK4ndZCMQKB4UbXR05x/2AmfTPeqRyuo/YXE0"

func TestOverlongKeyRefused(t *testing.T) {
	conn, _ := startManagement(t)
	client := mgmtpb.NewManagementServiceClient(conn)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := client.Login(ctx, &mgmtpb.EncryptedMessage{WgPubKey: overlongKey, Body: []byte{1}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("login with an overlong key: %v, want InvalidArgument", err)
	}
	if _, err := client.GetServerKey(ctx, &mgmtpb.Empty{}); err != nil {
		t.Fatalf("server down after the overlong key: %v", err)
	}
}
