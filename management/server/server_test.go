package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/grpcserver"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/relaywire"
	"github.com/wiremesh/wiremesh/internal/testpeer"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/grpcapi"
	"github.com/wiremesh/wiremesh/management/server"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/storetest"
	"github.com/wiremesh/wiremesh/management/tenant"
	"github.com/wiremesh/wiremesh/management/turncreds"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

type env struct {
	t    testing.TB
	dir  string
	srv  *server.Server
	conn *grpc.ClientConn
	addr string
	stop func()
}

func start(t *testing.T, dir string, issuer turncreds.Issuer) *env {
	return startWith(t, dir, server.Options{TURN: issuer})
}

func startWith(t testing.TB, dir string, o server.Options, advs ...func(*server.Advertiser)) *env {
	t.Helper()
	log := slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	adv := server.Advertiser{SignalPort: port, STUNPort: 3478, TURNPort: 3478}
	for _, f := range advs {
		f(&adv)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if o.Store.Engine == "" {
		o.Store = store.Config{Engine: store.SQLite, DataDir: dir}
	}
	if o.Store.DataDir == "" && o.Store.SecretKey == "" {
		// Instances sharing one Postgres store share one key, as
		// operators must give them (--store-encryption-key).
		o.Store.SecretKey = testSecretKey
	}
	o.Log, o.Advertise, o.Poll = log, adv, 100*time.Millisecond
	switch o.Identity.BuiltInIssuer {
	case autoIssuer:
		o.Identity.BuiltInIssuer = "http://" + ln.Addr().String() + "/oauth2"
	case autoIssuerRoot:
		o.Identity.BuiltInIssuer = "http://" + ln.Addr().String()
	}
	srv, err := server.Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	g := grpcserver.New()
	srv.Register(g)
	mux := http.NewServeMux()
	srv.Mount(mux)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = grpcserver.Serve(ctx, ln, g, mux, log, 2*time.Second)
	}()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, dir: dir, srv: srv, conn: conn, addr: ln.Addr().String()}
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			conn.Close()
			srv.API.Close()
			cancel()
			<-done
			srv.Close()
		})
	}
	t.Cleanup(e.stop)
	return e
}

// startOn starts a server on a fresh store of eng (a new SQLite directory
// or a new Postgres database, removed when the test ends).
func startOn(t testing.TB, eng storetest.Engine, o server.Options, advs ...func(*server.Advertiser)) *env {
	t.Helper()
	o.Store = eng.Config(t)
	return startWith(t, o.Store.DataDir, o, advs...)
}

// testSecretKey seals the store secrets of test servers that have no data
// directory to keep a key file in (32 bytes, base64).
const testSecretKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// autoIssuer in Options.Identity.BuiltInIssuer becomes the built-in
// provider's URL on the test server's port.
const autoIssuer = "auto"

// autoIssuerRoot is autoIssuer without a path: the issuer is the server's
// root URL.
const autoIssuerRoot = "auto-root"

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) { w.t.Log(string(p)); return len(p), nil }

func (e *env) setupKey(opts setupkey.Options) (account.SetupKey, string) {
	e.t.Helper()
	ctx := context.Background()
	acc, err := tenant.Default(ctx, e.srv.Store, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	k, secret, err := setupkey.New(acc.ID, opts, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.srv.Store.Tx(ctx, func(tx *store.Tx) error { return tx.In(k.AccountID).InsertSetupKey(ctx, k) }); err != nil {
		e.t.Fatal(err)
	}
	return k, secret
}

func (e *env) peerCount() int {
	e.t.Helper()
	ctx := context.Background()
	acc, _ := tenant.Default(ctx, e.srv.Store, time.Now())
	var n int
	_ = e.srv.Store.Read(ctx, func(tx *store.Tx) error {
		ps, err := tx.In(acc.ID).Peers(ctx)
		n = len(ps)
		return err
	})
	return n
}

func code(err error) codes.Code { return status.Code(err) }

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestPeersMeetAndLeave(t *testing.T) {
	e := start(t, t.TempDir(), turncreds.Issuer{Secret: "s"})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)

	a, b := testpeer.New(e.conn, "alpha"), testpeer.New(e.conn, "beta")
	var loginA *mgmtpb.LoginResponse
	for _, p := range []*testpeer.Peer{a, b} {
		// The official client first logs in without a key and registers only
		// after PermissionDenied.
		if _, err := p.Login(c, ""); code(err) != codes.PermissionDenied {
			t.Fatalf("keyless login of unknown peer: %v, want PermissionDenied", err)
		}
		// The client sends the key lowercased.
		lr, err := p.Login(c, strings.ToLower(secret))
		if err != nil {
			t.Fatalf("register %s: %v", p.Hostname, err)
		}
		if p == a {
			loginA = lr
		}
		// Login is idempotent for a registered key, with or without the key.
		if _, err := p.Login(c, ""); err != nil {
			t.Fatalf("keyless relogin: %v", err)
		}
	}
	if loginA.GetNetbirdConfig().GetSignal().GetUri() != e.addr || loginA.GetNetbirdConfig().GetSignal().GetProtocol() != mgmtpb.HostConfig_HTTP {
		t.Fatalf("signal config %v, want %s over HTTP", loginA.GetNetbirdConfig().GetSignal(), e.addr)
	}
	if fq := loginA.GetPeerConfig().GetFqdn(); fq != "alpha.netbird.selfhosted" {
		t.Fatalf("fqdn %q", fq)
	}

	sa, err := a.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sa.Close()
	sb, err := b.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()

	first := sa.Messages()[0]
	cfg := first.GetNetbirdConfig()
	if cfg.GetSignal() == nil || len(cfg.GetStuns()) != 1 || len(cfg.GetTurns()) != 1 {
		t.Fatalf("first sync must carry the full config, got %v", cfg)
	}
	turn := cfg.GetTurns()[0]
	if !turncreds.Valid("s", turn.GetUser(), turn.GetPassword(), time.Now()) {
		t.Fatalf("TURN credentials %q/%q do not validate", turn.GetUser(), turn.GetPassword())
	}
	// Per-peer: b's differ from a's.
	if tb := sb.Messages()[0].GetNetbirdConfig().GetTurns()[0]; tb.GetUser() == turn.GetUser() || tb.GetPassword() == turn.GetPassword() {
		t.Fatalf("peers share TURN credentials %q", turn.GetUser())
	}
	nmA := sa.LatestMap()
	if nmA.GetPeerConfig().GetAddress() != loginA.GetPeerConfig().GetAddress() {
		t.Fatalf("map address %q differs from login address %q", nmA.GetPeerConfig().GetAddress(), loginA.GetPeerConfig().GetAddress())
	}
	if err := sa.WaitFor(time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(sa.LatestMap(), b.Public()) }); err != nil {
		t.Fatalf("alpha does not see beta: %v", err)
	}
	if !testpeer.HasPeers(sb.LatestMap(), a.Public()) {
		t.Fatal("beta does not see alpha")
	}
	rp := sb.LatestMap().GetRemotePeers()[0]
	if rp.GetAllowedIps()[0] != addrOf(t, loginA.GetPeerConfig().GetAddress())+"/32" || rp.GetFqdn() != "alpha.netbird.selfhosted" {
		t.Fatalf("beta's view of alpha: %v", rp)
	}
	if len(sb.LatestMap().GetFirewallRules()) == 0 || sb.LatestMap().GetFirewallRulesIsEmpty() {
		t.Fatal("expected explicit allow-all firewall rules")
	}

	// A third peer (same hostname as alpha) appears at both within a second.
	serialBefore := sa.LatestMap().GetSerial()
	cpeer := testpeer.New(e.conn, "alpha")
	if _, err := cpeer.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	joined := time.Now()
	for name, s := range map[string]*testpeer.Stream{"alpha": sa, "beta": sb} {
		want := []key.Public{b.Public(), cpeer.Public()}
		if name == "beta" {
			want = []key.Public{a.Public(), cpeer.Public()}
		}
		if err := s.WaitFor(time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(s.LatestMap(), want...) }); err != nil {
			t.Fatalf("%s did not see the third peer: %v", name, err)
		}
	}
	t.Logf("third peer visible at both after %v", time.Since(joined))
	if sa.LatestMap().GetSerial() <= serialBefore {
		t.Fatalf("serial did not grow: %d -> %d", serialBefore, sa.LatestMap().GetSerial())
	}
	for _, rp := range sb.LatestMap().GetRemotePeers() {
		if rp.GetWgPubKey() == cpeer.Public().String() && rp.GetFqdn() != "alpha-2.netbird.selfhosted" {
			t.Fatalf("duplicate hostname got fqdn %q", rp.GetFqdn())
		}
	}

	// Deleting a peer removes it from the others' maps.
	if err := cpeer.Logout(c); err != nil {
		t.Fatal(err)
	}
	if err := sa.WaitFor(time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(sa.LatestMap(), b.Public()) }); err != nil {
		t.Fatalf("deleted peer still in alpha's map: %v", err)
	}
	if _, err := cpeer.Sync(c); code(err) != codes.PermissionDenied {
		t.Fatalf("sync of deleted peer: %v, want PermissionDenied", err)
	}

	// Deleting a connected peer tells it to drop everything and ends its stream.
	if err := b.Logout(c); err != nil {
		t.Fatal(err)
	}
	if err := sb.WaitFor(time.Second, func(msgs []*mgmtpb.SyncResponse) bool {
		nm := msgs[len(msgs)-1].GetNetworkMap()
		return nm.GetRemotePeersIsEmpty() && len(nm.GetRemotePeers()) == 0
	}); err != nil {
		t.Fatalf("deleted peer not emptied: %v", err)
	}
	if err := sa.WaitFor(time.Second, func([]*mgmtpb.SyncResponse) bool { return sa.LatestMap().GetRemotePeersIsEmpty() }); err != nil {
		t.Fatalf("alpha alone should get remotePeersIsEmpty: %v", err)
	}
}

func addrOf(t *testing.T, cidr string) string {
	ip, _, err := net.ParseCIDR(cidr)
	if err != nil {
		t.Fatalf("address %q is not CIDR: %v", cidr, err)
	}
	return ip.String()
}

func TestRefusedSetupKeysCreateNothing(t *testing.T) {
	e := start(t, t.TempDir(), turncreds.Issuer{})
	c := ctx(t)
	_, expired := e.setupKey(setupkey.Options{Reusable: true, Expiry: time.Millisecond})
	revokedKey, revoked := e.setupKey(setupkey.Options{Reusable: true})
	if err := e.srv.Store.Tx(c, func(tx *store.Tx) error { return tx.In(revokedKey.AccountID).RevokeSetupKey(c, revokedKey.ID) }); err != nil {
		t.Fatal(err)
	}
	_, oneOff := e.setupKey(setupkey.Options{})
	if _, err := testpeer.New(e.conn, "first").Login(c, oneOff); err != nil {
		t.Fatalf("one-off key first use: %v", err)
	}
	time.Sleep(5 * time.Millisecond)
	before := e.peerCount()
	for name, k := range map[string]string{
		"unknown":   "0b9ef5a2-8c1f-4f0e-9d6a-0c8c3f1b2a77",
		"malformed": "not-a-uuid",
		"expired":   expired,
		"revoked":   revoked,
		"exhausted": oneOff,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := testpeer.New(e.conn, name).Login(c, k)
			if code(err) != codes.PermissionDenied {
				t.Fatalf("got %v, want PermissionDenied", err)
			}
			if !strings.Contains(err.Error(), "setup key is invalid") {
				t.Fatalf("error does not say what is wrong: %v", err)
			}
		})
	}
	if n := e.peerCount(); n != before {
		t.Fatalf("refused keys created peers: %d -> %d", before, n)
	}
}

func TestBadEnvelopes(t *testing.T) {
	e := start(t, t.TempDir(), turncreds.Issuer{})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	client := mgmtpb.NewManagementServiceClient(e.conn)
	p := testpeer.New(e.conn, "p")
	good, _, err := p.Seal(c, &mgmtpb.LoginRequest{SetupKey: secret, Meta: p.Meta()})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := key.NewPrivate()
	wrongKeyBody, _ := envelope.Seal([]byte{0x12, 0x00}, other.Public(), p.Priv) // sealed for someone else
	tampered := append([]byte(nil), good.Body...)
	tampered[30] ^= 0xff
	cases := map[string]*mgmtpb.EncryptedMessage{
		"tampered":       {WgPubKey: good.WgPubKey, Body: tampered},
		"truncated":      {WgPubKey: good.WgPubKey, Body: good.Body[:len(good.Body)-3]},
		"short":          {WgPubKey: good.WgPubKey, Body: good.Body[:10]},
		"empty":          {WgPubKey: good.WgPubKey},
		"wrongly keyed":  {WgPubKey: good.WgPubKey, Body: wrongKeyBody},
		"claimed sender": {WgPubKey: other.Public().String(), Body: good.Body},
		"bad pubkey":     {WgPubKey: "not a key", Body: good.Body},
		"garbage plain":  {WgPubKey: good.WgPubKey, Body: mustSeal(t, p, c, []byte{0xff, 0xff, 0xff})},
	}
	for name, m := range cases {
		t.Run(name, func(t *testing.T) {
			if _, err := client.Login(c, m); code(err) != codes.InvalidArgument {
				t.Fatalf("Login: %v, want InvalidArgument", err)
			}
			st, err := client.Sync(c, m)
			if err == nil {
				_, err = st.Recv()
			}
			if code(err) != codes.InvalidArgument {
				t.Fatalf("Sync: %v, want InvalidArgument", err)
			}
		})
	}
	// Missing meta is FailedPrecondition.
	noMeta, _, _ := p.Seal(c, &mgmtpb.LoginRequest{SetupKey: secret})
	if _, err := client.Login(c, noMeta); code(err) != codes.FailedPrecondition {
		t.Fatalf("no meta: %v", err)
	}
	if n := e.peerCount(); n != 0 {
		t.Fatalf("bad requests created %d peers", n)
	}
	// Oversized requests are refused before they are read into memory.
	huge := &mgmtpb.EncryptedMessage{WgPubKey: good.WgPubKey, Body: make([]byte, grpcserver.MaxMessage+1)}
	if _, err := client.Login(c, huge); code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized: %v", err)
	}
	// The genuine message still works afterwards.
	if _, err := client.Login(c, good); err != nil {
		t.Fatal(err)
	}
}

func mustSeal(t *testing.T, p *testpeer.Peer, c context.Context, plain []byte) []byte {
	t.Helper()
	b, err := p.SealBytes(c, plain)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestUsageLimitUnderConcurrency(t *testing.T) {
	e := start(t, t.TempDir(), turncreds.Issuer{})
	_, secret := e.setupKey(setupkey.Options{Reusable: true, UsageLimit: 5})
	c := ctx(t)
	var ok, denied atomic.Int32
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, err := testpeer.New(e.conn, fmt.Sprintf("host%d", i)).Login(c, secret)
			switch code(err) {
			case codes.OK:
				ok.Add(1)
			case codes.PermissionDenied:
				denied.Add(1)
			default:
				t.Errorf("unexpected error: %v", err)
			}
		}(i)
	}
	wg.Wait()
	if ok.Load() != 5 || denied.Load() != 25 || e.peerCount() != 5 {
		t.Fatalf("granted %d, denied %d, peers %d; want 5/25/5", ok.Load(), denied.Load(), e.peerCount())
	}
}

func TestSerialMonotonicAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	e := start(t, dir, turncreds.Issuer{})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	a := testpeer.New(e.conn, "a")
	if _, err := a.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	s, err := a.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	before := s.LatestMap().GetSerial()
	s.Close()
	e.stop()

	e2 := start(t, dir, turncreds.Issuer{})
	a2 := testpeer.WithKey(e2.conn, "a", a.Priv)
	if _, err := a2.Login(c, ""); err != nil {
		t.Fatalf("registered peer after restart: %v", err)
	}
	b := testpeer.New(e2.conn, "b")
	if _, err := b.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	s2, err := a2.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if after := s2.LatestMap().GetSerial(); after <= before {
		t.Fatalf("serial went from %d to %d across a restart", before, after)
	}
}

func TestTURNCredentialsRefresh(t *testing.T) {
	e := start(t, t.TempDir(), turncreds.Issuer{Secret: "s", TTL: 4 * time.Second})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	a := testpeer.New(e.conn, "a")
	if _, err := a.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	s, err := a.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := s.Messages()[0].GetNetbirdConfig().GetTurns()[0].GetUser()
	// Refresh comes at 3/4 of the TTL, before expiry.
	if err := s.WaitFor(4*time.Second, func(msgs []*mgmtpb.SyncResponse) bool {
		last := msgs[len(msgs)-1]
		return len(msgs) > 1 && last.GetNetworkMap() == nil && last.GetNetbirdConfig() != nil
	}); err != nil {
		t.Fatalf("no credential refresh: %v", err)
	}
	msgs := s.Messages()
	cfg := msgs[len(msgs)-1].GetNetbirdConfig()
	if cfg.GetSignal() == nil || len(cfg.GetStuns()) == 0 {
		t.Fatal("refresh must carry the full config (it is authoritative on the client)")
	}
	if u := cfg.GetTurns()[0].GetUser(); u == first || !turncreds.Valid("s", u, cfg.GetTurns()[0].GetPassword(), time.Now()) {
		t.Fatalf("refreshed credentials %q (was %q) not fresh and valid", u, first)
	}
}

// TestRelayTokens: every NetbirdConfig carries the relays with a token that
// validates (a config without relay would clear the client's relays), and
// the token is refreshed before it expires.
func TestRelayTokens(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{Relay: grpcapi.RelayAuth{Secret: "relay-secret", TTL: 4 * time.Second}},
		func(a *server.Advertiser) { a.Relays = []string{"rels://relay.example.com:443"} })
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	a := testpeer.New(e.conn, "a")
	lr, err := a.Login(c, secret)
	if err != nil {
		t.Fatal(err)
	}
	check := func(rc *mgmtpb.RelayConfig) string {
		t.Helper()
		if len(rc.GetUrls()) != 1 || rc.GetUrls()[0] != "rels://relay.example.com:443" {
			t.Fatalf("relay URLs %v", rc.GetUrls())
		}
		tok, err := relaywire.Credentials{Payload: rc.GetTokenPayload(), Signature: rc.GetTokenSignature()}.Binary()
		if err != nil {
			t.Fatal(err)
		}
		claims, err := relaywire.Check("relay-secret", tok, time.Now())
		if err != nil {
			t.Fatalf("relay token: %v", err)
		}
		// Bound to this peer: the relay refuses it for any other peer ID.
		if err := claims.For(relaywire.HashID(a.Public().String()), false); err != nil {
			t.Fatalf("relay token for its own peer: %v", err)
		}
		if err := claims.For(relaywire.HashID("another peer"), false); err == nil {
			t.Fatal("relay token serves another peer ID")
		}
		return rc.GetTokenPayload()
	}
	check(lr.GetNetbirdConfig().GetRelay())
	s, err := a.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	first := check(s.Messages()[0].GetNetbirdConfig().GetRelay())
	if err := s.WaitFor(5*time.Second, func(msgs []*mgmtpb.SyncResponse) bool {
		last := msgs[len(msgs)-1]
		return len(msgs) > 1 && last.GetNetbirdConfig().GetRelay().GetTokenPayload() != first
	}); err != nil {
		t.Fatalf("no relay token refresh: %v", err)
	}
	msgs := s.Messages()
	check(msgs[len(msgs)-1].GetNetbirdConfig().GetRelay())
}

func TestNewestSyncWinsAndJob(t *testing.T) {
	e := start(t, t.TempDir(), turncreds.Issuer{})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	a := testpeer.New(e.conn, "a")
	if _, err := a.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	s1, err := a.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Close()
	s2, err := a.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if err := s1.WaitFor(2*time.Second, func([]*mgmtpb.SyncResponse) bool { return false }); code(err) != codes.Aborted {
		t.Fatalf("old stream should end Aborted, got %v", err)
	}
	if s2.Err() != nil {
		t.Fatalf("new stream ended: %v", s2.Err())
	}
	// Job: a registered peer's handshake is accepted and the stream held.
	client := mgmtpb.NewManagementServiceClient(e.conn)
	jctx, jcancel := context.WithTimeout(c, 300*time.Millisecond)
	defer jcancel()
	js, err := client.Job(jctx)
	if err != nil {
		t.Fatal(err)
	}
	hs, _, _ := a.Seal(c, &mgmtpb.JobRequest{ID: []byte("x")})
	if err := js.Send(hs); err != nil {
		t.Fatal(err)
	}
	_, err = js.Recv()
	// The server sees the same deadline and may end the stream a moment
	// before the client notices it: either way it held the stream until then.
	if dl, _ := jctx.Deadline(); time.Until(dl) > 50*time.Millisecond || (code(err) != codes.DeadlineExceeded && err != io.EOF) {
		t.Fatalf("job stream should be held open until our deadline, got %v with %v left", err, time.Until(dl))
	}
}

func TestEphemeralPeersRemovedWhenOffline(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{EphemeralTimeout: 300 * time.Millisecond})
	_, eph := e.setupKey(setupkey.Options{Reusable: true, Ephemeral: true})
	_, normal := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	gone, online, keeper := testpeer.New(e.conn, "gone"), testpeer.New(e.conn, "online"), testpeer.New(e.conn, "keeper")
	for p, k := range map[*testpeer.Peer]string{gone: eph, online: eph, keeper: normal} {
		if _, err := p.Login(c, k); err != nil {
			t.Fatal(err)
		}
	}
	s, err := online.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ks, err := keeper.Sync(c)
	if err != nil {
		t.Fatal(err)
	}
	ks.Close() // offline, but not ephemeral
	deadline := time.Now().Add(5 * time.Second)
	for e.peerCount() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("offline ephemeral peer not removed: %d peers", e.peerCount())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond)
	if n := e.peerCount(); n != 2 {
		t.Fatalf("connected ephemeral or offline normal peer removed: %d peers", n)
	}
	if _, err := gone.Login(c, ""); code(err) != codes.PermissionDenied {
		t.Fatalf("removed ephemeral peer still logs in: %v", err)
	}
	if err := s.WaitFor(2*time.Second, func([]*mgmtpb.SyncResponse) bool { return testpeer.HasPeers(s.LatestMap(), keeper.Public()) }); err != nil {
		t.Fatalf("online peer's map still lists the removed one: %v", err)
	}
}

// TestOnlyAffectedPeersGetUpdates: with access policies, an account change
// that leaves a peer's map as it was sends that peer nothing.
func TestOnlyAffectedPeersGetUpdates(t *testing.T) {
	e := start(t, t.TempDir(), turncreds.Issuer{})
	k, secret := e.setupKey(setupkey.Options{Reusable: true})
	acc := k.AccountID
	c := ctx(t)
	names := []string{"a", "b", "c"}
	streams := map[string]*testpeer.Stream{}
	peerIDs := map[string]account.PeerID{}
	for _, n := range names {
		p := testpeer.New(e.conn, n)
		if _, err := p.Login(c, secret); err != nil {
			t.Fatal(err)
		}
		s, err := p.Sync(c)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(s.Close)
		streams[n] = s
		_ = e.srv.Store.Read(c, func(tx *store.Tx) error {
			got, err := tx.PeerByKey(c, p.Public())
			peerIDs[n] = got.ID
			return err
		})
	}
	edit := func(fn func(at *store.AccountTx) error) {
		t.Helper()
		err := e.srv.Store.Tx(c, func(tx *store.Tx) error {
			at := tx.In(acc)
			if err := fn(at); err != nil {
				return err
			}
			_, err := at.BumpSerial(c)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	counts := func() map[string]int {
		out := map[string]int{}
		for n, s := range streams {
			out[n] = len(s.Messages())
		}
		return out
	}
	settle := func() map[string]int {
		time.Sleep(700 * time.Millisecond) // the store watcher polls every 100 ms here
		return counts()
	}
	// Only a -> b on tcp/22; c is in no policy.
	_, def := store.DefaultAccess(acc)
	edit(func(at *store.AccountTx) error {
		if err := at.PutGroup(c, account.Group{ID: "A", AccountID: acc, Name: "A", Peers: []account.PeerID{peerIDs["a"]}}); err != nil {
			return err
		}
		if err := at.PutGroup(c, account.Group{ID: "B", AccountID: acc, Name: "B", Peers: []account.PeerID{peerIDs["b"]}}); err != nil {
			return err
		}
		def.Enabled = false
		if err := at.PutPolicy(c, def); err != nil {
			return err
		}
		return at.PutPolicy(c, account.Policy{ID: "ssh", AccountID: acc, Name: "ssh", Enabled: true, Rules: []account.Rule{{ID: "r",
			Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoTCP, Ports: []uint16{22},
			Sources: []account.GroupID{"A"}, Destinations: []account.GroupID{"B"}}}})
	})
	before := settle()
	if m := streams["c"].LatestMap(); len(m.GetRemotePeers()) != 0 {
		t.Fatalf("c (in no policy) sees %d peers", len(m.GetRemotePeers()))
	}
	if m := streams["a"].LatestMap(); len(m.GetRemotePeers()) != 1 || len(m.GetFirewallRules()) == 0 {
		t.Fatalf("a's map: %d peers, %d rules", len(m.GetRemotePeers()), len(m.GetFirewallRules()))
	}
	// A group no policy uses changes nobody's map: nobody hears of it.
	edit(func(at *store.AccountTx) error {
		return at.PutGroup(c, account.Group{ID: "C", AccountID: acc, Name: "C", Peers: []account.PeerID{peerIDs["c"]}})
	})
	after := settle()
	for _, n := range names {
		if after[n] != before[n] {
			t.Errorf("%s got %d updates for a change that does not affect it", n, after[n]-before[n])
		}
	}
	// Letting C reach B changes b's and c's maps, not a's.
	edit(func(at *store.AccountTx) error {
		return at.PutPolicy(c, account.Policy{ID: "c2b", AccountID: acc, Name: "c2b", Enabled: true, Rules: []account.Rule{{ID: "r",
			Enabled: true, Action: account.ActionAccept, Protocol: account.ProtoAll, Sources: []account.GroupID{"C"}, Destinations: []account.GroupID{"B"}}}})
	})
	last := settle()
	if last["a"] != after["a"] || last["b"] == after["b"] || last["c"] == after["c"] {
		t.Fatalf("updates after C -> B: a %d, b %d, c %d (want only b and c)", last["a"]-after["a"], last["b"]-after["b"], last["c"]-after["c"])
	}
}

// TestSetupKeyGuessingLimited: a source that keeps presenting unknown
// setup keys is refused after a burst, while registered peers of the same
// source still log in and a valid key from it still registers (one
// guesser behind a shared NAT must not lock its neighbours out).
func TestSetupKeyGuessingLimited(t *testing.T) {
	e := startWith(t, t.TempDir(), server.Options{Now: frozen()})
	_, secret := e.setupKey(setupkey.Options{Reusable: true})
	c := ctx(t)
	member := testpeer.New(e.conn, "member")
	if _, err := member.Login(c, secret); err != nil {
		t.Fatal(err)
	}
	limited := false
	for i := range 30 {
		_, err := testpeer.New(e.conn, "guesser").Login(c, uuid.NewString())
		switch code(err) {
		case codes.PermissionDenied:
			if i >= 10 {
				t.Fatalf("guess %d still answered PermissionDenied", i+1)
			}
		case codes.ResourceExhausted:
			if i < 10 {
				t.Fatalf("limited after only %d guesses", i)
			}
			limited = true
		default:
			t.Fatalf("guess %d: %v", i+1, err)
		}
	}
	if !limited {
		t.Fatal("30 wrong setup keys were never limited")
	}
	if _, err := member.Login(c, ""); err != nil {
		t.Fatalf("a registered peer of the limited source cannot log in: %v", err)
	}
	if _, err := testpeer.New(e.conn, "late").Login(c, secret); err != nil {
		t.Fatalf("a valid key from the limited source was refused: %v", err)
	}
	if _, err := testpeer.New(e.conn, "guesser").Login(c, uuid.NewString()); code(err) != codes.ResourceExhausted {
		t.Fatalf("a guess after the valid key: %v, want ResourceExhausted", err)
	}
}
