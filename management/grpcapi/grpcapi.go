// Package grpcapi is the management gRPC boundary: it opens and seals the
// NetBird envelope, converts protobuf to domain values and back, and maps
// domain errors to the status codes the official client depends on
// (SPEC-wire.md §4.1, §10). Rules live in the domain packages.
package grpcapi

import (
	"cmp"
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	grpcpeer "google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/wiremesh/wiremesh/internal/clientip"
	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/internal/ratelimit"
	"github.com/wiremesh/wiremesh/internal/relaywire"
	"github.com/wiremesh/wiremesh/internal/version"
	"github.com/wiremesh/wiremesh/management/account"
	"github.com/wiremesh/wiremesh/management/networkmap"
	"github.com/wiremesh/wiremesh/management/peerconns"
	"github.com/wiremesh/wiremesh/management/peers"
	"github.com/wiremesh/wiremesh/management/setupkey"
	"github.com/wiremesh/wiremesh/management/sshaudit"
	"github.com/wiremesh/wiremesh/management/store"
	"github.com/wiremesh/wiremesh/management/turncreds"
	"github.com/wiremesh/wiremesh/management/updates"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Endpoints are the service addresses handed to clients.
type Endpoints struct {
	Signal    string // host:port, no scheme
	SignalTLS bool
	STUNs     []string // stun:host:port
	TURNs     []string // turn:host:port?transport=udp
	Relays    []string // rel://host:port or rels://host:port
}

// VersionHeader is the response header of GetServerKey that carries the
// server's version.
const VersionHeader = "x-wiremesh-server-version"

// RelayAuth signs the tokens for the relays.
type RelayAuth struct {
	Secret string        // shared with the relays
	TTL    time.Duration // token lifetime; 0: DefaultRelayTTL
}

// DefaultRelayTTL is the lifetime of relay tokens, as the reference.
const DefaultRelayTTL = 12 * time.Hour

func (r RelayAuth) ttl() time.Duration {
	if r.TTL <= 0 {
		return DefaultRelayTTL
	}
	return r.TTL
}

// Advertiser decides what to advertise to a client that dialed host.
type Advertiser interface {
	Advertise(dialedHost string) Endpoints
}

// Options wire the server.
type Options struct {
	Store     *store.Store
	Peers     *peers.Service
	Hub       *updates.Hub
	ServerKey key.Private
	Advertise Advertiser
	TURN      turncreds.Issuer
	Relay     RelayAuth
	// SSO logs users in through an identity provider; nil: setup keys only.
	SSO SSO
	// MaxSyncs bounds Sync streams being set up at once (opened, first map
	// not yet sent), as the reference's NB_MAX_CONCURRENT_SYNCS: a
	// reconnect storm is turned away with ResourceExhausted (clients retry
	// with backoff) instead of piling up. 0 means 1000. Open streams are not
	// limited.
	MaxSyncs int
	// Jobs hands remote jobs (debug bundles) to peers on their Job
	// streams; nil: streams are held and no job is sent.
	Jobs JobQueue
	// JobFirstMessage is how long a Job stream may wait for the client's
	// first (handshake) message before it is ended (0: 30 s). Clients send
	// it at once.
	JobFirstMessage time.Duration
	// TrustedProxies are proxies whose x-forwarded-for metadata names the
	// client for the setup-key limit; from other peers it is ignored.
	TrustedProxies []netip.Prefix
	// Ended learns that a peer's current Sync stream ended (nil: nobody);
	// temporary peers are removed then.
	Ended SyncEnder
	// SendBudget bounds the bytes of network maps built and not yet
	// written out to their clients, so memory during a fan-out does not
	// grow with the number of streams (0: DefaultSendBudget). Needs a
	// gRPC server from grpcserver.New.
	SendBudget int64
	// Conns keeps the connection reports of our agents (P2P, relayed)
	// while their streams are open; nil: reports are ignored.
	Conns *peerconns.Tracker
	// SSHAudit records what our agents report of their SSH servers
	// (WiremeshSSHEvents); nil: the method answers Unimplemented, as
	// NetBird's server does.
	SSHAudit *sshaudit.Recorder
	Log      *slog.Logger
	Now      func() time.Time
}

// SyncEnder learns that a peer's current Sync stream on this instance
// ended, the peer recorded offline (not when a newer stream replaced it,
// nor when the server shuts down).
type SyncEnder interface {
	SyncEnded(ctx context.Context, acc account.ID, id account.PeerID) error
}

// Server implements management.ManagementService.
type Server struct {
	mgmtpb.UnimplementedManagementServiceServer
	o      Options
	pub    key.Public
	syncs  atomic.Int64 // open streams
	setups atomic.Int64 // streams not yet past their first map
	// mapSlots bounds maps being computed, marshalled and sealed at once:
	// more than the cores can work on only multiplies memory.
	mapSlots chan struct{}
	closed   chan struct{}
	snaps    snapshots
	sshAuth  sshAuthCache // each account's users for NetBird's SSH JWT check (sshauth.go)
	// keyGuard limits wrong setup keys per source address: 10 at once,
	// then one per 6 s. It never refuses a valid key: see checkSetupKey.
	keyGuard *ratelimit.Limiter
	keyLog   *ratelimit.Every // refusals logged at most once per 10 s
	// fpSeed keys the fingerprints of the maps sent (compared only within
	// this process).
	fpSeed maphash.Seed
	// firstMaps bounds first maps sent to wiremesh agents and not yet
	// read by them (Sync).
	firstMaps chan struct{}
	// sendBudget bounds the bytes of responses built and not yet written
	// out (sendbudget.go); mapEstimate is the size of the last whole map
	// sealed, a stream's estimate for its first.
	sendBudget  *budget
	mapEstimate atomic.Int64
	bufs        bufPool // buffers of maps, reused (sendbudget.go)

	logins, loginFailures, mapsSent, mapsSkipped, guessesRefused atomic.Int64
	deltasSent                                                   atomic.Int64
	fanout                                                       latency
}

// latency sums observed durations, for a Prometheus summary without
// quantiles (rate(sum)/rate(count) is the mean) and the largest seen.
type latency struct {
	sum, count, max atomic.Int64 // ns, observations, ns
}

func (l *latency) observe(d time.Duration) {
	l.sum.Add(int64(d))
	l.count.Add(1)
	for {
		m := l.max.Load()
		if int64(d) <= m || l.max.CompareAndSwap(m, int64(d)) {
			return
		}
	}
}

// New returns a Server. Call Close to end open streams.
func New(o Options) *Server {
	if o.MaxSyncs == 0 {
		o.MaxSyncs = 1000
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Server{o: o, pub: o.ServerKey.Public(), closed: make(chan struct{}), fpSeed: maphash.MakeSeed(), firstMaps: make(chan struct{}, 32), keyGuard: ratelimit.New(ratelimit.Options{Burst: 10, Refill: 6 * time.Second, MaxKeys: 10000, Now: o.Now}),
		keyLog:   ratelimit.NewEvery(10*time.Second, o.Now),
		mapSlots: make(chan struct{}, 2*runtime.GOMAXPROCS(0)), sendBudget: newBudget(cmp.Or(o.SendBudget, DefaultSendBudget))}
}

// Register adds the service to g.
func (s *Server) Register(g *grpc.Server) { mgmtpb.RegisterManagementServiceServer(g, s) }

// Close ends every open Sync and Job stream so that a graceful stop does not wait for clients.
func (s *Server) Close() {
	select {
	case <-s.closed:
	default:
		close(s.closed)
	}
}

var errBadMessage = status.Error(codes.InvalidArgument, "invalid request message")

// open authenticates and decrypts a request. It returns the sender's key and
// the per-peer shared key for the reply.
func (s *Server) open(req *mgmtpb.EncryptedMessage, into proto.Message) (key.Public, *envelope.Shared, error) {
	pk, err := key.ParsePublic(req.GetWgPubKey())
	if err != nil {
		return key.Public{}, nil, status.Error(codes.InvalidArgument, "invalid wgPubKey: "+err.Error())
	}
	sh := envelope.NewShared(s.o.ServerKey, pk)
	if err := sh.OpenProto(req.GetBody(), into); err != nil {
		return key.Public{}, nil, errBadMessage
	}
	return pk, sh, nil
}

func (s *Server) seal(sh *envelope.Shared, m proto.Message) (*mgmtpb.EncryptedMessage, error) {
	plain, err := proto.Marshal(m)
	if err != nil {
		return nil, status.Error(codes.Internal, "seal response")
	}
	return s.sealBytes(sh, plain)
}

// sealBytes seals an already encoded message.
func (s *Server) sealBytes(sh *envelope.Shared, plain []byte) (*mgmtpb.EncryptedMessage, error) {
	body, err := sh.Seal(plain)
	if err != nil {
		return nil, status.Error(codes.Internal, "seal response")
	}
	return &mgmtpb.EncryptedMessage{WgPubKey: s.pub.String(), Body: body}, nil
}

// GetServerKey returns the key clients seal their requests with.
func (s *Server) GetServerKey(ctx context.Context, _ *mgmtpb.Empty) (*mgmtpb.ServerKeyResponse, error) {
	// Our agent shows the server's version in `netbird status`; other
	// clients ignore the header.
	_ = grpc.SetHeader(ctx, metadata.Pairs(VersionHeader, version.Version))
	return &mgmtpb.ServerKeyResponse{Key: s.pub.String(), ExpiresAt: timestamppb.New(s.o.Now().Add(24 * time.Hour))}, nil
}

// IsHealthy answers health probes.
func (s *Server) IsHealthy(context.Context, *mgmtpb.Empty) (*mgmtpb.Empty, error) {
	return &mgmtpb.Empty{}, nil
}

// Login registers or logs in a peer.
func (s *Server) Login(ctx context.Context, req *mgmtpb.EncryptedMessage) (*mgmtpb.EncryptedMessage, error) {
	var lr mgmtpb.LoginRequest
	pk, sh, err := s.open(req, &lr)
	if err != nil {
		return nil, err
	}
	if lr.GetMeta() == nil {
		return nil, status.Error(codes.FailedPrecondition, "peer system meta is required")
	}
	var user *account.User
	if lr.GetSetupKey() == "" && lr.GetJwtToken() != "" {
		if user, err = s.ssoUser(ctx, lr.GetJwtToken()); err != nil {
			s.loginFailures.Add(1)
			return nil, err
		}
	}
	guess, err := s.checkSetupKey(ctx, lr.GetSetupKey())
	if err != nil {
		return nil, err
	}
	peer, acc, err := s.o.Peers.Login(ctx, peers.LoginInput{
		Key:       pk,
		SetupKey:  lr.GetSetupKey(),
		Meta:      metaFrom(ctx, lr.GetMeta()),
		SSHPubKey: clip(string(lr.GetPeerKeys().GetSshPubKey())),
		User:      user,
	})
	if err != nil {
		s.loginFailures.Add(1)
		if errors.Is(err, setupkey.ErrUnknown) || errors.Is(err, setupkey.ErrMalformed) {
			guess.Fail() // guessing: slow the source down
			s.o.Log.WarnContext(ctx, "login with an unknown setup key", "src", s.clientAddr(ctx), "peer_key", pk.String())
		} else {
			guess.Success()
		}
		return nil, s.loginError(ctx, pk, err)
	}
	guess.Success()
	s.logins.Add(1)
	m := networkmap.Map{Domain: acc.Domain, Network: acc.Network, Self: peer, Flags: networkmap.FlagsOf(acc.Settings), NetworkV6: acc.NetworkV6}
	// address_v6 as every map will give it, or the client restarts in a loop.
	if m.SelfV6, err = s.selfV6(ctx, acc, peer); err != nil {
		return nil, s.loginError(ctx, pk, err)
	}
	resp := &mgmtpb.LoginResponse{
		NetbirdConfig: s.netbirdConfig(ctx, peer),
		PeerConfig:    peerConfig(m),
	}
	// NetBird's agents start their SSH server only with a jwtConfig.
	s.addSSHAuth(ctx, peer, acc.Serial, resp.PeerConfig, nil)
	return s.seal(sh, resp)
}

func (s *Server) loginError(ctx context.Context, pk key.Public, err error) error {
	switch {
	case errors.Is(err, peers.ErrNotRegistered):
		return status.Error(codes.PermissionDenied, "no peer auth method provided, please use a setup key or interactive SSO login")
	case errors.Is(err, peers.ErrLoginExpired), errors.Is(err, peers.ErrUserBlocked), errors.Is(err, peers.ErrOtherUser), errors.Is(err, peers.ErrSSHKeyTaken):
		return status.Error(codes.PermissionDenied, err.Error())
	case errors.Is(err, setupkey.ErrInvalid):
		// PermissionDenied makes the official client fail at once with
		// NeedsLogin instead of retrying a hopeless key for two minutes.
		return status.Error(codes.PermissionDenied, "couldn't add peer: "+err.Error())
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return status.FromContextError(err).Err()
	case errors.Is(err, store.ErrUnavailable):
		// Clients retry Unavailable with backoff: right while the database
		// restarts.
		s.o.Log.WarnContext(ctx, "login: store unavailable", "peer_key", pk.String(), "err", err)
		return status.Error(codes.Unavailable, "management store temporarily unavailable, retry")
	}
	s.o.Log.ErrorContext(ctx, "login failed", "peer_key", pk.String(), "err", err)
	return status.Error(codes.Internal, "login failed")
}

// netbirdConfig is the full config; it is authoritative on the client, so
// it always carries everything (signal, STUN, fresh TURN credentials, the
// relays with a fresh token: a config without relay clears the client's).
// TURN credentials and the relay token are the peer's own: the relay
// refuses the token for any other peer ID, and the TURN user name names
// the peer.
func (s *Server) netbirdConfig(ctx context.Context, peer account.Peer) *mgmtpb.NetbirdConfig {
	ep := s.o.Advertise.Advertise(dialedHost(ctx))
	proto := mgmtpb.HostConfig_HTTP
	if ep.SignalTLS {
		proto = mgmtpb.HostConfig_HTTPS
	}
	cfg := &mgmtpb.NetbirdConfig{Signal: &mgmtpb.HostConfig{Uri: ep.Signal, Protocol: proto}}
	for _, u := range ep.STUNs {
		cfg.Stuns = append(cfg.Stuns, &mgmtpb.HostConfig{Uri: u, Protocol: mgmtpb.HostConfig_UDP})
	}
	if len(ep.TURNs) > 0 {
		user, pass := s.o.TURN.CredentialsFor(s.o.Now(), string(peer.ID))
		for _, u := range ep.TURNs {
			cfg.Turns = append(cfg.Turns, &mgmtpb.ProtectedHostConfig{HostConfig: &mgmtpb.HostConfig{Uri: u, Protocol: mgmtpb.HostConfig_UDP}, User: user, Password: pass})
		}
	}
	if len(ep.Relays) > 0 && s.o.Relay.Secret != "" {
		cr := relaywire.IssueFor(s.o.Relay.Secret, s.o.Now().Add(s.o.Relay.ttl()), relaywire.HashID(peer.Key.String()))
		cfg.Relay = &mgmtpb.RelayConfig{Urls: ep.Relays, TokenPayload: cr.Payload, TokenSignature: cr.Signature}
	}
	return cfg
}

// dialedHost is the host part of the :authority the client used, so that a
// server without --public-address advertises an address the client reaches.
func dialedHost(ctx context.Context) string {
	md, _ := metadata.FromIncomingContext(ctx)
	auth := ""
	if v := md.Get(":authority"); len(v) > 0 {
		auth = v[0]
	}
	if h, _, err := net.SplitHostPort(auth); err == nil {
		return h
	}
	return auth
}

func (s *Server) registeredPeer(ctx context.Context, pk key.Public) (account.Peer, error) {
	var p account.Peer
	err := s.o.Store.Read(ctx, func(tx *store.Tx) error {
		var err error
		p, err = tx.PeerByKey(ctx, pk)
		return err
	})
	if errors.Is(err, store.ErrNotFound) {
		return p, status.Error(codes.PermissionDenied, "peer is not registered")
	}
	if errors.Is(err, store.ErrUnavailable) {
		return p, status.Error(codes.Unavailable, "management store temporarily unavailable, retry")
	}
	if err != nil {
		s.o.Log.ErrorContext(ctx, "peer lookup failed", "err", err)
		return p, status.Error(codes.Internal, "peer lookup failed")
	}
	return p, nil
}

// refreshEvery is how often a connected peer gets fresh credentials: at
// three quarters of the shorter lifetime of TURN credentials and relay
// tokens, so neither expires while the peer is connected.
func (s *Server) refreshEvery() time.Duration {
	d := s.o.TURN.Refresh()
	if s.o.Relay.Secret != "" {
		d = min(d, s.o.Relay.ttl()*3/4)
	}
	return d
}

// checkSetupKey applies the wrong-key limit to a login presenting key.
// Setup keys are 122-bit random UUIDs found by one lookup of their hash:
// the limit cannot be what keeps them secret and an evaluation costs
// little, so a valid key is never refused, whoever else shares its
// source. A source with wrong keys left gets a reservation (settled by
// the caller: a wrong key spends it); a source past the limit gets one
// read-only lookup outside any transaction, and only a key that exists
// goes on to log in. Wrong keys past the limit are refused with
// ResourceExhausted, counted and logged.
func (s *Server) checkSetupKey(ctx context.Context, key string) (*ratelimit.Reservation, error) {
	if key == "" {
		return nil, nil
	}
	src := s.clientAddr(ctx)
	r, err := s.keyGuard.Reserve(ratelimit.Key{Src: src, Subject: "setup-key"})
	if err == nil {
		return r, nil
	}
	if s.setupKeyExists(ctx, key) {
		return nil, nil
	}
	s.guessesRefused.Add(1)
	if ok, n := s.keyLog.Allow(); ok {
		s.o.Log.WarnContext(ctx, "setup key refused: too many invalid keys from this address", "src", src, "err", err, "not_logged", n)
	}
	return nil, status.Error(codes.ResourceExhausted, "too many invalid setup keys from this address; wait a minute and check the key")
}

// setupKeyExists looks key up by its hash, read-only.
func (s *Server) setupKeyExists(ctx context.Context, key string) bool {
	hash, err := setupkey.Parse(key)
	if err != nil {
		return false
	}
	err = s.o.Store.Read(ctx, func(tx *store.Tx) error {
		_, err := tx.SetupKeyByHash(ctx, hash)
		return err
	})
	return err == nil
}

// clientAddr is the client's address for limits: the peer's, or what a
// trusted proxy forwarded in x-forwarded-for.
func (s *Server) clientAddr(ctx context.Context) netip.Addr {
	peer := sourceAddr(ctx)
	md, _ := metadata.FromIncomingContext(ctx)
	return clientip.Resolver{Trusted: s.o.TrustedProxies}.Resolve(peer, md.Get("x-forwarded-for"))
}

// sourceAddr is the client's IP address (the zero Addr if unknown).
func sourceAddr(ctx context.Context) netip.Addr {
	p, ok := grpcpeer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return netip.Addr{}
	}
	ap, err := netip.ParseAddrPort(p.Addr.String())
	if err != nil {
		return netip.Addr{}
	}
	return ap.Addr().Unmap()
}

// Metrics are management's counters.
func (s *Server) Metrics() []metrics.Sample {
	txs, txTime, reads, readTime := s.o.Store.Timing()
	c := func(name, help string, v int64) metrics.Sample {
		return metrics.Sample{Name: name, Help: help, Kind: metrics.Counter, Value: float64(v)}
	}
	return []metrics.Sample{
		{Name: "management_sync_streams", Help: "open Sync streams (connected peers)", Kind: metrics.Gauge, Value: float64(s.syncs.Load())},
		c("management_logins_total", "successful logins and registrations", s.logins.Load()),
		c("management_login_failures_total", "refused logins", s.loginFailures.Load()),
		c("management_setup_key_guesses_refused_total", "logins refused by the per-source wrong-key limit", s.guessesRefused.Load()),
		{Name: "management_send_budget_bytes", Help: "bytes of network maps built and not yet written out (bounded by the send budget)", Kind: metrics.Gauge, Value: float64(s.sendBudget.inUse())},
		c("management_maps_sent_total", "network maps sent on Sync streams", s.mapsSent.Load()),
		c("management_map_deltas_sent_total", "network map deltas sent (of the maps sent) to clients that asked for them", s.deltasSent.Load()),
		c("management_maps_skipped_total", "account changes that left a stream's map as it was (nothing sent)", s.mapsSkipped.Load()),
		{Name: "management_fanout_seconds_sum", Help: "time from an account change to a stream's new map being sent, summed", Kind: metrics.Counter,
			Value: time.Duration(s.fanout.sum.Load()).Seconds()},
		{Name: "management_fanout_seconds_count", Help: "maps sent because of an account change", Kind: metrics.Counter, Value: float64(s.fanout.count.Load())},
		{Name: "management_store_transactions_total", Help: "store transactions", Kind: metrics.Counter, Value: float64(txs)},
		{Name: "management_store_transaction_seconds_total", Help: "time spent in store transactions", Kind: metrics.Counter, Value: txTime.Seconds()},
		{Name: "management_store_reads_total", Help: "store reads outside transactions", Kind: metrics.Counter, Value: float64(reads)},
		{Name: "management_store_read_seconds_total", Help: "time spent in store reads", Kind: metrics.Counter, Value: readTime.Seconds()},
		{Name: "management_fanout_seconds_max", Help: "longest time from an account change to a stream's new map", Kind: metrics.Gauge,
			Value: time.Duration(s.fanout.max.Load()).Seconds()},
	}
}
