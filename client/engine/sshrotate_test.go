package engine

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/client/mgmtclient"
	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// rotateServer is management's Login as a key rotation meets it: it
// records each login's SSH key and metadata; during hooks it runs during
// handling (before it answers), refuse makes it refuse.
type rotateServer struct {
	mgmtpb.UnimplementedManagementServiceServer
	priv key.Private

	mu     sync.Mutex
	keys   []string
	metas  []*mgmtpb.PeerSystemMeta
	refuse bool
	during func()
}

func (l *rotateServer) GetServerKey(context.Context, *mgmtpb.Empty) (*mgmtpb.ServerKeyResponse, error) {
	return &mgmtpb.ServerKeyResponse{Key: l.priv.Public().String()}, nil
}

func (l *rotateServer) Login(_ context.Context, m *mgmtpb.EncryptedMessage) (*mgmtpb.EncryptedMessage, error) {
	pk, err := key.ParsePublic(m.GetWgPubKey())
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	sh := envelope.NewShared(l.priv, pk)
	var lr mgmtpb.LoginRequest
	if err := sh.OpenProto(m.GetBody(), &lr); err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	l.mu.Lock()
	l.keys = append(l.keys, string(lr.GetPeerKeys().GetSshPubKey()))
	l.metas = append(l.metas, lr.GetMeta())
	refuse, during := l.refuse, l.during
	l.during = nil
	l.mu.Unlock()
	if during != nil {
		during()
	}
	if refuse {
		return nil, status.Error(codes.InvalidArgument, "SSH key refused")
	}
	body, err := sh.SealProto(&mgmtpb.LoginResponse{NetbirdConfig: &mgmtpb.NetbirdConfig{Signal: &mgmtpb.HostConfig{Uri: "127.0.0.1:1"}},
		PeerConfig: &mgmtpb.PeerConfig{Address: "100.64.0.1/16"}})
	if err != nil {
		return nil, err
	}
	return &mgmtpb.EncryptedMessage{WgPubKey: l.priv.Public().String(), Body: body}, nil
}

func (l *rotateServer) last() (string, *mgmtpb.PeerSystemMeta) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.keys) == 0 {
		return "", nil
	}
	return l.keys[len(l.keys)-1], l.metas[len(l.metas)-1]
}

// TestRotateSSHKeySessionClient: the rotation logs in through the
// session's own management client, which reports the new key from before
// that login on (a login of the session during it cannot put the old key
// back); the login carries the connection report; a refusal sets the
// session's client back to the old key.
func TestRotateSSHKeySessionClient(t *testing.T) {
	priv, _ := key.NewPrivate()
	srvPriv, _ := key.NewPrivate()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &rotateServer{priv: srvPriv}
	g := grpc.NewServer()
	mgmtpb.RegisterManagementServiceServer(g, l)
	done := make(chan struct{})
	go func() { defer close(done); _ = g.Serve(ln) }()
	t.Cleanup(func() { g.Stop(); <-done })
	target, err := mgmtclient.ParseURL("http://" + ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	mc, err := mgmtclient.Dial(target, priv, log)
	if err != nil {
		t.Fatal(err)
	}
	defer mc.Close()
	e := &Engine{o: Options{Private: priv, Management: target}, log: log, mgmt: mc, meta: &mgmtpb.PeerSystemMeta{Hostname: "h"}}
	ctx := context.Background()
	pubOf := func(k ed25519.PrivateKey) string {
		t.Helper()
		ak, err := sshserver.AgentKey(priv, k)
		if err != nil {
			t.Fatal(err)
		}
		s, err := sshserver.AuthorizedKeyOf(ak)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	derived := pubOf(nil)
	_, k1, _ := ed25519.GenerateKey(rand.Reader)

	// A session login while management handles the rotation's login
	// reports the new key.
	var during string
	l.mu.Lock()
	l.during = func() {
		if _, err := e.mgmt.Login(ctx, "", e.meta); err != nil {
			t.Errorf("session login during the rotation: %v", err)
		}
		during, _ = l.last()
	}
	l.mu.Unlock()
	if err := e.RotateSSHKey(ctx, k1); err != nil {
		t.Fatal(err)
	}
	if want := pubOf(k1); during != want {
		t.Fatalf("a session login during the rotation reported %q, want the new key %q", during, want)
	}
	l.mu.Lock()
	rotMeta := l.metas[0]
	l.mu.Unlock()
	if rotMeta.GetWiremeshConnections() == nil || rotMeta.GetHostname() != "h" {
		t.Fatalf("rotation login's metadata %v lacks the connection report or the session's metadata", rotMeta)
	}
	if !e.o.SSHKey.Equal(k1) {
		t.Fatal("engine does not keep the new key")
	}

	// Refused: the session's client reports the old key again.
	_, k2, _ := ed25519.GenerateKey(rand.Reader)
	l.mu.Lock()
	l.refuse = true
	l.mu.Unlock()
	if err := e.RotateSSHKey(ctx, k2); err == nil {
		t.Fatal("refused rotation succeeded")
	}
	l.mu.Lock()
	l.refuse = false
	l.mu.Unlock()
	if _, err := e.mgmt.Login(ctx, "", e.meta); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.last(); got != pubOf(k1) || got == derived {
		t.Fatalf("after a refused rotation the session reports %q, want the previous key %q", got, pubOf(k1))
	}
	if !e.o.SSHKey.Equal(k1) {
		t.Fatal("a refused rotation changed the engine's key")
	}
}
