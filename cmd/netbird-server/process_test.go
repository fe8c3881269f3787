package main_test

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pion/turn/v4"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/proctest"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
	"github.com/wiremesh/wiremesh/proto/signalpb"
)

var listening = regexp.MustCompile(`on (127\.0\.0\.1:\d+)`)

// metricsAt matches where --metrics-addr serves.
var metricsAt = regexp.MustCompile(`metrics:\s+http://(127\.0\.0\.1:\d+)/metrics`)

func freeUDPPort(t *testing.T) int {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	return pc.LocalAddr().(*net.UDPAddr).Port
}

func dial(t *testing.T, addr string) *grpc.ClientConn {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func createKey(t *testing.T, bin, dir string, args ...string) string {
	out, err := proctest.Run(t, bin, append([]string{"admin", "--datadir", dir, "setup-keys", "create"}, args...)...)
	if err != nil {
		t.Fatalf("admin setup-keys create: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	return lines[len(lines)-1]
}

// TestAllInOne runs netbird-server as a process: keys made by the admin
// command register peers, peers see each other, the embedded TURN server
// accepts the credentials management hands out, and a peer deleted by the
// admin command drops out of the others' maps.
func TestAllInOne(t *testing.T) {
	dir := t.TempDir()
	stun := freeUDPPort(t)
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", dir, "--listen", "127.0.0.1:0", "--stun-port", strconv.Itoa(stun), "--turn-relay-ip", "127.0.0.1")
	addr := srv.Wait(t, listening, 20*time.Second)[1]
	srv.Wait(t, regexp.MustCompile(`setup-keys create`), 5*time.Second)
	// The owner's initial password, printed once, is also in the data
	// directory, readable by the server's user only.
	pw := srv.Wait(t, regexp.MustCompile(`initial password (\S+) `), 5*time.Second)[1]
	pwFile := filepath.Join(dir, "initial-password")
	if b, err := os.ReadFile(pwFile); err != nil || !strings.Contains(string(b), "password: "+pw+"\n") {
		t.Fatalf("%s: %v\n%s", pwFile, err, b)
	}
	if fi, err := os.Stat(pwFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v %v, want 0600", pwFile, fi.Mode(), err)
	}

	secret := createKey(t, "netbird-server", dir, "--reusable")
	conn := dial(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	a, b := testpeer.New(conn, "a"), testpeer.New(conn, "b")
	for _, p := range []*testpeer.Peer{a, b} {
		if _, err := p.Login(ctx, secret); err != nil {
			t.Fatalf("login with admin-made key: %v", err)
		}
	}
	sa, err := a.Sync(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	if err := sa.WaitFor(time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(sa.LatestMap(), b.Public()) }); err != nil {
		t.Fatal(err)
	}
	cfg := sa.Messages()[0].GetNetbirdConfig()
	if cfg.GetSignal().GetUri() != addr {
		t.Fatalf("signal advertised as %q, want the dialed %q", cfg.GetSignal().GetUri(), addr)
	}
	wantSTUN := "stun:127.0.0.1:" + strconv.Itoa(stun)
	if len(cfg.GetStuns()) != 1 || cfg.GetStuns()[0].GetUri() != wantSTUN {
		t.Fatalf("stuns %v, want %s", cfg.GetStuns(), wantSTUN)
	}

	// The embedded TURN server allocates with the handed-out credentials.
	tc := cfg.GetTurns()[0]
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	client, err := turn.NewClient(&turn.ClientConfig{STUNServerAddr: "127.0.0.1:" + strconv.Itoa(stun), TURNServerAddr: "127.0.0.1:" + strconv.Itoa(stun),
		Conn: pc, Username: tc.GetUser(), Password: tc.GetPassword(), Realm: "wiremesh"})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.Listen(); err != nil {
		t.Fatal(err)
	}
	relay, err := client.Allocate()
	if err != nil {
		t.Fatalf("TURN allocate with issued credentials: %v", err)
	}
	relay.Close()
	if refl, err := client.SendBindingRequest(); err != nil || !strings.HasPrefix(refl.String(), "127.0.0.1:") {
		t.Fatalf("STUN binding: %v %v", refl, err)
	}
	bad, _ := turn.NewClient(&turn.ClientConfig{TURNServerAddr: "127.0.0.1:" + strconv.Itoa(stun), Conn: mustPC(t), Username: tc.GetUser(), Password: "wrong", Realm: "wiremesh"})
	defer bad.Close()
	_ = bad.Listen()
	if _, err := bad.Allocate(); err == nil {
		t.Fatal("TURN accepted a wrong password")
	}

	// Deleting b with the admin command, while the server runs, reaches a.
	out, err := proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "peers", "list")
	if err != nil {
		t.Fatal(err, out)
	}
	var bID string
	for _, line := range strings.Split(out, "\n") {
		if strings.Contains(line, b.Public().String()) {
			bID = strings.Fields(line)[0]
		}
	}
	if bID == "" {
		t.Fatalf("peer b not listed:\n%s", out)
	}
	if out, err := proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "peers", "delete", bID); err != nil {
		t.Fatal(err, out)
	}
	if err := sa.WaitFor(3*time.Second, func([]*mgmtpb.SyncResponse) bool { return sa.LatestMap().GetRemotePeersIsEmpty() }); err != nil {
		t.Fatalf("admin deletion did not reach the stream: %v", err)
	}

	// Revoked keys register nothing.
	out, _ = proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "setup-keys", "list")
	id := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])[0]
	if out, err := proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "setup-keys", "revoke", id); err != nil {
		t.Fatal(err, out)
	}
	out, _ = proctest.Run(t, "netbird-server", "admin", "--datadir", dir, "setup-keys", "list")
	if !strings.Contains(out, "revoked") || strings.Contains(out, secret) {
		t.Fatalf("list after revoke:\n%s", out)
	}
	if _, err := testpeer.New(conn, "c").Login(ctx, secret); err == nil {
		t.Fatal("revoked key registered a peer")
	}
}

func mustPC(t *testing.T) net.PacketConn {
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	return pc
}

// TestSeparateServers runs netbird-mgmt and netbird-signal as two processes:
// management points clients at the signal process, and signal relays
// between two peers that learned its address from management.
func TestSeparateServers(t *testing.T) {
	dir := t.TempDir()
	sig := proctest.Start(t, nil, "netbird-signal", "--listen", "127.0.0.1:0")
	sigAddr := sig.Wait(t, listening, 20*time.Second)[1]
	mg := proctest.Start(t, nil, "netbird-mgmt", "--datadir", dir, "--listen", "127.0.0.1:0", "--signal", sigAddr, "--stun", "stun:127.0.0.1:3478")
	mgAddr := mg.Wait(t, listening, 20*time.Second)[1]
	secret := createKey(t, "netbird-mgmt", dir, "--reusable", "--usage-limit", "2")

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn := dial(t, mgAddr)
	a, b := testpeer.New(conn, "a"), testpeer.New(conn, "b")
	var uri string
	for _, p := range []*testpeer.Peer{a, b} {
		lr, err := p.Login(ctx, secret)
		if err != nil {
			t.Fatal(err)
		}
		uri = lr.GetNetbirdConfig().GetSignal().GetUri()
	}
	if uri != sigAddr {
		t.Fatalf("signal uri %q, want %q", uri, sigAddr)
	}
	if _, err := testpeer.New(conn, "c").Login(ctx, secret); err == nil {
		t.Fatal("usage limit 2 allowed a third peer")
	}
	sc := signalpb.NewSignalExchangeClient(dial(t, uri))
	// a sends on the connection that holds its own stream, as clients do.
	fromA, err := sc.ConnectStream(metadata.AppendToOutgoingContext(ctx, "x-wiretrustee-peer-id", a.Public().String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fromA.Header(); err != nil {
		t.Fatal(err)
	}
	stream, err := sc.ConnectStream(metadata.AppendToOutgoingContext(ctx, "x-wiretrustee-peer-id", b.Public().String()))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Header(); err != nil {
		t.Fatal(err)
	}
	msg := &signalpb.EncryptedMessage{Key: a.Public().String(), RemoteKey: b.Public().String(), Body: []byte("sealed bytes")}
	if _, err := sc.Send(ctx, msg); err != nil {
		t.Fatal(err)
	}
	got, err := stream.Recv()
	if err != nil || string(got.GetBody()) != "sealed bytes" {
		t.Fatalf("recv %v %v", got, err)
	}
	_ = key.Size
}

// TestMetricsAndHealth: --metrics-addr answers /metrics (management,
// signal, relay and listener counters), the public port does not (404),
// and the public port answers /healthz.
func TestMetricsAndHealth(t *testing.T) {
	dir := t.TempDir()
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", dir, "--listen", "127.0.0.1:0", "--stun-port", "0", "--metrics-addr", "127.0.0.1:0")
	addr := srv.Wait(t, listening, 30*time.Second)[1]
	metricsAddr := srv.Wait(t, metricsAt, 30*time.Second)[1]
	key := createKey(t, "netbird-server", dir, "--reusable")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := testpeer.New(dial(t, addr), "m").Login(ctx, key); err != nil {
		t.Fatal(err)
	}
	get := func(path string) (int, string) {
		host := addr
		if path == "/metrics" {
			host = metricsAddr
		}
		resp, err := http.Get("http://" + host + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/metrics")
	for _, want := range []string{"management_logins_total 1", "management_sync_streams 0", "signal_streams 0", "relay_connections 0", "# TYPE management_logins_total counter", "listener_connections_open "} {
		if code != 200 || !strings.Contains(body, want) {
			t.Fatalf("/metrics (%d) lacks %q:\n%s", code, want, body)
		}
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("/metrics on the public port: %d, want 404", resp.StatusCode)
	}
	if code, body := get("/healthz"); code != 200 || !strings.Contains(body, `"ok"`) {
		t.Fatalf("/healthz: %d %s", code, body)
	}
}

// TestMemoryLimit: --memory-limit sets the runtime's soft limit, shown on
// /metrics; a value that is not a size stops the server with an error
// naming the flag.
func TestMemoryLimit(t *testing.T) {
	out, err := proctest.Run(t, "netbird-server", "--datadir", t.TempDir(), "--listen", "127.0.0.1:0", "--stun-port", "0", "--memory-limit", "300M")
	if err == nil || !strings.Contains(out, "--memory-limit") || !strings.Contains(out, "unknown unit") {
		t.Fatalf("bad --memory-limit: %v\n%s", err, out)
	}
	srv := proctest.Start(t, nil, "netbird-server", "--datadir", t.TempDir(), "--listen", "127.0.0.1:0", "--stun-port", "0", "--metrics-addr", "127.0.0.1:0", "--memory-limit", "300MiB")
	metricsAddr := srv.Wait(t, metricsAt, 30*time.Second)[1]
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{"go_memory_limit_bytes 3.145728e+08", "go_memory_limit_near 0", "go_memory_used_bytes "} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("/metrics lacks %q:\n%s", want, b)
		}
	}
}
