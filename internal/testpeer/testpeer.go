// Package testpeer is a minimal management client for tests: it speaks the
// envelope over real gRPC (GetServerKey, Login, Sync) the way the official
// client does, and exposes what the server sent. It is not the agent.
package testpeer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/mapdelta"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Peer is one simulated client.
type Peer struct {
	Priv     key.Private
	Hostname string
	Version  string
	// Deltas makes Sync ask for network map deltas, as our agent does; the
	// stream then holds the whole maps they lead to (Raw: as received).
	Deltas bool
	// SSHPubKey is reported at login (PeerKeys.sshPubKey), as an agent
	// reports its SSH host key; empty sends none.
	SSHPubKey string
	// IPv6 reports capability IPv6Overlay (2), as a NetBird v0.77 client
	// with IPv6 on does; DisableIPv6 reports flags.disableIPv6.
	IPv6, DisableIPv6 bool
	client            mgmtpb.ManagementServiceClient
}

// New creates a peer with a fresh key.
func New(conn *grpc.ClientConn, hostname string) *Peer {
	k, err := key.NewPrivate()
	if err != nil {
		panic(err)
	}
	return &Peer{Priv: k, Hostname: hostname, Version: "0.77.1", client: mgmtpb.NewManagementServiceClient(conn)}
}

// WithKey creates a peer with a given key (a restarted client keeps its key).
func WithKey(conn *grpc.ClientConn, hostname string, k key.Private) *Peer {
	p := New(conn, hostname)
	p.Priv = k
	return p
}

// SealBytes seals raw plaintext for the server (for malformed-request tests).
func (p *Peer) SealBytes(ctx context.Context, plain []byte) ([]byte, error) {
	sh, _, err := p.shared(ctx)
	if err != nil {
		return nil, err
	}
	return sh.Seal(plain)
}

// Public is the peer's WireGuard key.
func (p *Peer) Public() key.Public { return p.Priv.Public() }

func (p *Peer) shared(ctx context.Context) (*envelope.Shared, key.Public, error) {
	r, err := p.client.GetServerKey(ctx, &mgmtpb.Empty{})
	if err != nil {
		return nil, key.Public{}, err
	}
	sk, err := key.ParsePublic(r.GetKey())
	if err != nil {
		return nil, key.Public{}, err
	}
	return envelope.NewShared(p.Priv, sk), sk, nil
}

// Meta is what the official client reports.
func (p *Peer) Meta() *mgmtpb.PeerSystemMeta {
	m := &mgmtpb.PeerSystemMeta{Hostname: p.Hostname, GoOS: "linux", NetbirdVersion: p.Version, Kernel: "Linux",
		Capabilities: []mgmtpb.PeerCapability{mgmtpb.PeerCapability_PeerCapabilitySourcePrefixes}, SyncMessageVersion: 1}
	if p.IPv6 {
		m.Capabilities = append(m.Capabilities, mgmtpb.PeerCapability_PeerCapabilityIPv6Overlay)
	}
	if p.DisableIPv6 {
		m.Flags = &mgmtpb.Flags{DisableIPv6: true}
	}
	return m
}

// Seal builds an EncryptedMessage for the server.
func (p *Peer) Seal(ctx context.Context, m proto.Message) (*mgmtpb.EncryptedMessage, *envelope.Shared, error) {
	sh, _, err := p.shared(ctx)
	if err != nil {
		return nil, nil, err
	}
	body, err := sh.SealProto(m)
	if err != nil {
		return nil, nil, err
	}
	return &mgmtpb.EncryptedMessage{WgPubKey: p.Public().String(), Body: body}, sh, nil
}

// Login calls Login with setupKey ("" for a keyless login).
func (p *Peer) Login(ctx context.Context, setupKey string) (*mgmtpb.LoginResponse, error) {
	return p.login(ctx, &mgmtpb.LoginRequest{SetupKey: setupKey})
}

// LoginJWT calls Login with an SSO token.
func (p *Peer) LoginJWT(ctx context.Context, jwt string) (*mgmtpb.LoginResponse, error) {
	return p.login(ctx, &mgmtpb.LoginRequest{JwtToken: jwt})
}

// DeviceFlow fetches the device authorization flow's provider config.
func (p *Peer) DeviceFlow(ctx context.Context) (*mgmtpb.DeviceAuthorizationFlow, error) {
	msg, sh, err := p.Seal(ctx, &mgmtpb.DeviceAuthorizationFlowRequest{})
	if err != nil {
		return nil, err
	}
	resp, err := p.client.GetDeviceAuthorizationFlow(ctx, msg)
	if err != nil {
		return nil, err
	}
	var f mgmtpb.DeviceAuthorizationFlow
	return &f, sh.OpenProto(resp.GetBody(), &f)
}

// PKCEFlow fetches the PKCE flow's provider config.
func (p *Peer) PKCEFlow(ctx context.Context) (*mgmtpb.PKCEAuthorizationFlow, error) {
	msg, sh, err := p.Seal(ctx, &mgmtpb.PKCEAuthorizationFlowRequest{})
	if err != nil {
		return nil, err
	}
	resp, err := p.client.GetPKCEAuthorizationFlow(ctx, msg)
	if err != nil {
		return nil, err
	}
	var f mgmtpb.PKCEAuthorizationFlow
	return &f, sh.OpenProto(resp.GetBody(), &f)
}

func (p *Peer) login(ctx context.Context, req *mgmtpb.LoginRequest) (*mgmtpb.LoginResponse, error) {
	req.Meta, req.PeerKeys = p.Meta(), &mgmtpb.PeerKeys{WgPubKey: []byte(p.Public().String()), SshPubKey: []byte(p.SSHPubKey)}
	msg, sh, err := p.Seal(ctx, req)
	if err != nil {
		return nil, err
	}
	resp, err := p.client.Login(ctx, msg)
	if err != nil {
		return nil, err
	}
	var lr mgmtpb.LoginResponse
	if err := sh.OpenProto(resp.GetBody(), &lr); err != nil {
		return nil, err
	}
	return &lr, nil
}

// Logout deletes the peer.
func (p *Peer) Logout(ctx context.Context) error {
	msg, _, err := p.Seal(ctx, &mgmtpb.Empty{})
	if err != nil {
		return err
	}
	_, err = p.client.Logout(ctx, msg)
	return err
}

// Stream is an open Sync.
type Stream struct {
	mu     sync.Mutex
	cond   chan struct{} // closed and replaced on every message
	msgs   []*mgmtpb.SyncResponse
	raw    []*mgmtpb.SyncResponse
	err    error
	cancel context.CancelFunc
	done   chan struct{}
}

// Sync opens a Sync stream and receives in the background until Close.
// It fails if the first response does not arrive (e.g. PermissionDenied).
func (p *Peer) Sync(ctx context.Context) (*Stream, error) {
	sctx, cancel := context.WithCancel(ctx)
	req := &mgmtpb.SyncRequest{Meta: p.Meta()}
	if p.Deltas {
		req.WiremeshCapabilities = &mgmtpb.WiremeshCapabilities{NetworkMapDeltas: true, DerivedPeerDNS: true}
	}
	msg, sh, err := p.Seal(sctx, req)
	if err != nil {
		cancel()
		return nil, err
	}
	st, err := p.client.Sync(sctx, msg)
	if err != nil {
		cancel()
		return nil, err
	}
	first, err := recv(st, sh)
	if err != nil {
		cancel()
		return nil, err
	}
	var state mapdelta.State
	// Raw keeps what the server sent: Update may fill a map in place.
	firstRaw := proto.Clone(first).(*mgmtpb.SyncResponse)
	whole, err := state.Update(first)
	if err != nil {
		cancel()
		return nil, err
	}
	s := &Stream{cond: make(chan struct{}), msgs: []*mgmtpb.SyncResponse{whole}, raw: []*mgmtpb.SyncResponse{firstRaw}, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(s.done)
		for {
			r, err := recv(st, sh)
			var w *mgmtpb.SyncResponse
			if err == nil {
				raw := proto.Clone(r).(*mgmtpb.SyncResponse)
				w, err = state.Update(r)
				r = raw
			}
			s.mu.Lock()
			if err != nil {
				s.err = err
			} else {
				s.msgs = append(s.msgs, w)
				s.raw = append(s.raw, r)
			}
			close(s.cond)
			s.cond = make(chan struct{})
			s.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	return s, nil
}

func recv(st grpc.ServerStreamingClient[mgmtpb.EncryptedMessage], sh *envelope.Shared) (*mgmtpb.SyncResponse, error) {
	m, err := st.Recv()
	if err != nil {
		return nil, err
	}
	var r mgmtpb.SyncResponse
	if err := sh.OpenProto(m.GetBody(), &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// Raw returns the responses as received (deltas as deltas).
func (s *Stream) Raw() []*mgmtpb.SyncResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*mgmtpb.SyncResponse(nil), s.raw...)
}

// Close ends the stream and waits for its reader.
func (s *Stream) Close() {
	s.cancel()
	<-s.done
}

// Messages returns everything received so far.
func (s *Stream) Messages() []*mgmtpb.SyncResponse {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*mgmtpb.SyncResponse(nil), s.msgs...)
}

// Err is the error that ended the stream, if it ended.
func (s *Stream) Err() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// LatestMap returns the newest network map received.
func (s *Stream) LatestMap() *mgmtpb.NetworkMap {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.msgs) - 1; i >= 0; i-- {
		if nm := s.msgs[i].GetNetworkMap(); nm != nil {
			return nm
		}
	}
	return nil
}

// WaitFor waits until pred holds for the messages received, or timeout.
func (s *Stream) WaitFor(timeout time.Duration, pred func(msgs []*mgmtpb.SyncResponse) bool) error {
	deadline := time.After(timeout)
	for {
		s.mu.Lock()
		msgs := append([]*mgmtpb.SyncResponse(nil), s.msgs...)
		ch, err := s.cond, s.err
		s.mu.Unlock()
		if pred(msgs) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("stream ended: %w", err)
		}
		select {
		case <-ch:
		case <-deadline:
			return fmt.Errorf("condition not met within %v", timeout)
		}
	}
}

// HasPeers reports whether nm lists exactly the given keys as remote peers.
func HasPeers(nm *mgmtpb.NetworkMap, keys ...key.Public) bool {
	if nm == nil || len(nm.GetRemotePeers()) != len(keys) {
		return false
	}
	want := map[string]bool{}
	for _, k := range keys {
		want[k.String()] = true
	}
	for _, rp := range nm.GetRemotePeers() {
		if !want[rp.GetWgPubKey()] {
			return false
		}
	}
	return true
}

// SyncMeta reports metadata with the given files' states (answers to
// posture checks).
func (p *Peer) SyncMeta(ctx context.Context, files ...*mgmtpb.File) error {
	m := p.Meta()
	m.Files = files
	msg, _, err := p.Seal(ctx, &mgmtpb.SyncMetaRequest{Meta: m})
	if err != nil {
		return err
	}
	_, err = p.client.SyncMeta(ctx, msg)
	return err
}

// ReportConns reports connections as our agent does (metadata with
// wiremeshConnections, through SyncMeta).
func (p *Peer) ReportConns(ctx context.Context, conns ...*mgmtpb.WiremeshConnection) error {
	m := p.Meta()
	m.WiremeshConnections = &mgmtpb.WiremeshConnections{Connections: conns}
	msg, _, err := p.Seal(ctx, &mgmtpb.SyncMetaRequest{Meta: m})
	if err != nil {
		return err
	}
	_, err = p.client.SyncMeta(ctx, msg)
	return err
}

// StuckSync opens a Sync stream and never reads from it, as a client
// that hangs would; it ends with ctx.
func (p *Peer) StuckSync(ctx context.Context) error {
	msg, _, err := p.Seal(ctx, &mgmtpb.SyncRequest{Meta: p.Meta()})
	if err != nil {
		return err
	}
	_, err = p.client.Sync(ctx, msg)
	return err
}
