// Package mgmtclient is the agent's management connection: it fetches the
// server key, logs in (registering with a setup key when the server says
// the peer is unknown), and follows the Sync stream with reconnects. Errors
// are turned into messages that say what to do.
package mgmtclient

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/wiremesh/wiremesh/client/sshserver"
	"github.com/wiremesh/wiremesh/internal/envelope"
	"github.com/wiremesh/wiremesh/internal/key"
	"github.com/wiremesh/wiremesh/internal/mapdelta"
	"github.com/wiremesh/wiremesh/internal/sockmark"
	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

// Errors callers check with errors.Is.
var (
	ErrNeedsLogin    = errors.New("login needed: run netbird up (it opens an SSO login) or netbird up --setup-key KEY")
	ErrBadSetupKey   = errors.New("the management server refused the setup key")
	ErrPermanentSync = errors.New("the management server no longer accepts this peer")
)

// Target is a parsed management URL.
type Target struct {
	Addr string // host:port
	TLS  bool
	URL  string // normalised, for display and persistence
}

// ParseURL accepts http(s)://host[:port] (the path is ignored, as gRPC
// cannot be mounted under one).
func ParseURL(raw string) (Target, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return Target{}, errors.New("no management URL: pass --management-url http(s)://HOST:PORT")
	}
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return Target{}, fmt.Errorf("management URL %q is not valid: want http://HOST:PORT or https://HOST[:PORT]", raw)
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	t := Target{Addr: net.JoinHostPort(host, port), TLS: u.Scheme == "https"}
	t.URL = u.Scheme + "://" + t.Addr
	return t, nil
}

// TLSConfig is the TLS configuration of connections to the server (nil
// for plain http): the gRPC connection and the debug-bundle uploads share
// it.
func (t Target) TLSConfig() *tls.Config {
	if !t.TLS {
		return nil
	}
	return &tls.Config{MinVersion: tls.VersionTLS12}
}

// Client is a management connection.
type Client struct {
	t    Target
	priv key.Private
	conn *grpc.ClientConn
	api  mgmtpb.ManagementServiceClient
	log  *slog.Logger

	connected     atomic.Bool
	streams       atomic.Uint64 // Sync streams that got their first message
	lastErr       atomic.Value
	serverKey     atomic.Value // key.Public
	serverVersion atomic.Value // string
	// sshKey is the rotated SSH key logins report (SetSSHKey); nil
	// reports the one derived from priv.
	sshKey atomic.Pointer[ed25519.PrivateKey]
}

// SetSSHKey makes logins report k's public half as this peer's SSH key:
// the profile's rotated key (netbird ssh rotate-key). Without it, or with
// nil, logins report the key derived from the WireGuard key.
func (c *Client) SetSSHKey(k ed25519.PrivateKey) {
	if k == nil {
		c.sshKey.Store(nil)
		return
	}
	c.sshKey.Store(&k)
}

// versionHeader is where our management server names its version.
const versionHeader = "x-wiremesh-server-version"

// Dial prepares a connection (gRPC connects lazily).
func Dial(t Target, priv key.Private, log *slog.Logger) (*Client, error) {
	creds := insecure.NewCredentials()
	if c := t.TLSConfig(); c != nil {
		creds = credentials.NewTLS(c)
	}
	// passthrough: the marked dialer resolves the name itself, over marked
	// sockets (grpc's own resolver would look it up through the tunnel
	// when an exit node holds the default route).
	conn, err := grpc.NewClient("passthrough:///"+t.Addr, grpc.WithTransportCredentials(creds),
		// No service config from DNS TXT records: the lookup only costs time
		// (seconds where the resolver is slow or unreachable) and the
		// servers publish none.
		grpc.WithDisableServiceConfig(),
		// Marked sockets stay outside the tunnel whatever routes cover
		// the server (client/routes).
		grpc.WithContextDialer(sockmark.DialContext),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("management %s: %w", t.URL, err)
	}
	return &Client{t: t, priv: priv, conn: conn, api: mgmtpb.NewManagementServiceClient(conn), log: log}, nil
}

// Close releases the connection.
func (c *Client) Close() error { return c.conn.Close() }

// URL is the management URL.
func (c *Client) URL() string { return c.t.URL }

// Connected reports whether a Sync stream is open.
func (c *Client) Connected() bool { return c.connected.Load() }

// LastError is the latest error, if any.
func (c *Client) LastError() string {
	s, _ := c.lastErr.Load().(string)
	return s
}

func (c *Client) shared(ctx context.Context) (*envelope.Shared, error) {
	sk, err := c.ServerKey(ctx)
	if err != nil {
		return nil, err
	}
	return envelope.NewShared(c.priv, sk), nil
}

// ServerKey asks the server for its WireGuard key (its identity).
func (c *Client) ServerKey(ctx context.Context) (key.Public, error) {
	var md metadata.MD
	r, err := c.api.GetServerKey(ctx, &mgmtpb.Empty{}, grpc.Header(&md))
	if err != nil {
		return key.Public{}, c.explain(err)
	}
	sk, err := key.ParsePublic(r.GetKey())
	if err != nil {
		return key.Public{}, fmt.Errorf("management server sent an invalid key: %w", err)
	}
	c.serverKey.Store(sk)
	if v := md.Get(versionHeader); len(v) > 0 {
		c.serverVersion.Store(v[0])
	}
	return sk, nil
}

// ServerVersion is the version the server reported ("" if unknown).
func (c *Client) ServerVersion() string {
	v, _ := c.serverVersion.Load().(string)
	return v
}

func (c *Client) explain(err error) error {
	switch status.Code(err) {
	case codes.Unavailable:
		return fmt.Errorf("cannot reach the management server at %s (is it running, and is the URL right?): %w", c.t.URL, err)
	case codes.DeadlineExceeded:
		return fmt.Errorf("the management server at %s did not answer in time: %w", c.t.URL, err)
	}
	return err
}

// Login logs in, registering with setupKey if the server does not know
// this peer. It returns the login response. A peer that must log in
// through SSO (new without a key, or its login expired) gets
// ErrNeedsLogin with the server's reason.
func (c *Client) Login(ctx context.Context, setupKey string, meta *mgmtpb.PeerSystemMeta) (*mgmtpb.LoginResponse, error) {
	lr, err := c.login(ctx, &mgmtpb.LoginRequest{}, meta)
	if status.Code(err) != codes.PermissionDenied {
		return lr, err
	}
	if setupKey == "" {
		return nil, fmt.Errorf("%w: %s", ErrNeedsLogin, status.Convert(err).Message())
	}
	lr, err = c.login(ctx, &mgmtpb.LoginRequest{SetupKey: setupKey}, meta)
	if code := status.Code(err); code == codes.PermissionDenied || code == codes.NotFound || code == codes.InvalidArgument {
		return nil, fmt.Errorf("%w: %s", ErrBadSetupKey, status.Convert(err).Message())
	}
	return lr, err
}

// LoginJWT logs in with a token from the identity provider, registering
// the peer for its user when it is new.
func (c *Client) LoginJWT(ctx context.Context, jwt string, meta *mgmtpb.PeerSystemMeta) (*mgmtpb.LoginResponse, error) {
	lr, err := c.login(ctx, &mgmtpb.LoginRequest{JwtToken: jwt}, meta)
	if status.Code(err) == codes.PermissionDenied {
		return nil, fmt.Errorf("%w: %s", ErrSSORefused, status.Convert(err).Message())
	}
	return lr, err
}

// ErrSSORefused is a login token the server did not accept.
var ErrSSORefused = errors.New("the management server refused the login")

// Flows asks how users log in: the PKCE and the device flow's provider
// configurations, nil where the server offers none.
func (c *Client) Flows(ctx context.Context) (pkce, device *mgmtpb.ProviderConfig, err error) {
	sh, err := c.shared(ctx)
	if err != nil {
		return nil, nil, err
	}
	call := func(m proto.Message, rpc func(context.Context, *mgmtpb.EncryptedMessage, ...grpc.CallOption) (*mgmtpb.EncryptedMessage, error), out proto.Message) (bool, error) {
		body, err := sh.SealProto(m)
		if err != nil {
			return false, err
		}
		resp, err := rpc(ctx, &mgmtpb.EncryptedMessage{WgPubKey: c.priv.Public().String(), Body: body})
		if code := status.Code(err); code == codes.NotFound || code == codes.Unimplemented {
			return false, nil
		}
		if err != nil {
			return false, c.explain(err)
		}
		return true, sh.OpenProto(resp.GetBody(), out)
	}
	var pf mgmtpb.PKCEAuthorizationFlow
	ok, err := call(&mgmtpb.PKCEAuthorizationFlowRequest{}, c.api.GetPKCEAuthorizationFlow, &pf)
	if err != nil {
		return nil, nil, err
	}
	if ok {
		pkce = pf.GetProviderConfig()
	}
	var df mgmtpb.DeviceAuthorizationFlow
	if ok, err = call(&mgmtpb.DeviceAuthorizationFlowRequest{}, c.api.GetDeviceAuthorizationFlow, &df); err != nil {
		return nil, nil, err
	}
	if ok {
		device = df.GetProviderConfig()
	}
	return pkce, device, nil
}

func (c *Client) login(ctx context.Context, req *mgmtpb.LoginRequest, meta *mgmtpb.PeerSystemMeta) (*mgmtpb.LoginResponse, error) {
	sh, err := c.shared(ctx)
	if err != nil {
		return nil, err
	}
	// Every login reports the SSH key (a login without it would clear it
	// on the server and peers could no longer check this peer's SSH
	// server): the one derived from the WireGuard key, or the rotated one.
	var rotated ed25519.PrivateKey
	if p := c.sshKey.Load(); p != nil {
		rotated = *p
	}
	k, err := sshserver.AgentKey(c.priv, rotated)
	if err != nil {
		return nil, err
	}
	sshKey, err := sshserver.AuthorizedKeyOf(k)
	if err != nil {
		return nil, err
	}
	req.Meta, req.PeerKeys = meta, &mgmtpb.PeerKeys{WgPubKey: []byte(c.priv.Public().String()), SshPubKey: []byte(sshKey)}
	body, err := sh.SealProto(req)
	if err != nil {
		return nil, err
	}
	resp, err := c.api.Login(ctx, &mgmtpb.EncryptedMessage{WgPubKey: c.priv.Public().String(), Body: body})
	if err != nil {
		return nil, c.explain(err)
	}
	var lr mgmtpb.LoginResponse
	if err := sh.OpenProto(resp.GetBody(), &lr); err != nil {
		return nil, fmt.Errorf("management login response: %w", err)
	}
	if lr.GetNetbirdConfig().GetSignal() == nil || lr.GetPeerConfig().GetAddress() == "" {
		return nil, errors.New("management login response lacks signal or address")
	}
	return &lr, nil
}

// Logout deletes this peer on the server.
func (c *Client) Logout(ctx context.Context) error {
	sh, err := c.shared(ctx)
	if err != nil {
		return err
	}
	body, err := sh.SealProto(&mgmtpb.Empty{})
	if err != nil {
		return err
	}
	_, err = c.api.Logout(ctx, &mgmtpb.EncryptedMessage{WgPubKey: c.priv.Public().String(), Body: body})
	return c.explain(err)
}

// Sync follows the Sync stream until ctx ends, reconnecting with backoff,
// and hands each update to apply. It returns ErrPermanentSync when the
// server answers PermissionDenied (the peer was deleted).
func (c *Client) Sync(ctx context.Context, meta *mgmtpb.PeerSystemMeta, apply func(*mgmtpb.SyncResponse)) error {
	backoff := 800 * time.Millisecond
	for ctx.Err() == nil {
		start := time.Now()
		err := c.syncOnce(ctx, meta, apply)
		c.connected.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if status.Code(err) == codes.PermissionDenied {
			c.lastErr.Store(err.Error())
			return fmt.Errorf("%w: %s", ErrPermanentSync, status.Convert(err).Message())
		}
		if err != nil {
			c.lastErr.Store(err.Error())
			c.log.Warn("management stream ended, reconnecting", "err", err, "in", backoff)
		}
		if time.Since(start) > 30*time.Second {
			backoff = 800 * time.Millisecond
		}
		// Jitter spreads the reconnects of many agents after an outage.
		wait := backoff/2 + time.Duration(rand.Int64N(int64(backoff/2)))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		// gRPC keeps its own, longer backoff for a connection that was
		// refused: the next attempt is ours to time.
		c.conn.ResetConnectBackoff()
		// At most ~3 s between attempts: agents are back within seconds of
		// the server's return.
		backoff = min(time.Duration(float64(backoff)*1.7), 3*time.Second)
	}
	return nil
}

func (c *Client) syncOnce(ctx context.Context, meta *mgmtpb.PeerSystemMeta, apply func(*mgmtpb.SyncResponse)) error {
	sh, err := c.shared(ctx)
	if err != nil {
		return err
	}
	body, err := sh.SealProto(&mgmtpb.SyncRequest{Meta: meta,
		WiremeshCapabilities: &mgmtpb.WiremeshCapabilities{NetworkMapDeltas: true, DerivedPeerDNS: true, DebugBundleUpload: true}})
	if err != nil {
		return err
	}
	var state mapdelta.State
	st, err := c.api.Sync(ctx, &mgmtpb.EncryptedMessage{WgPubKey: c.priv.Public().String(), Body: body})
	if err != nil {
		return err
	}
	first := true
	for {
		m, err := st.Recv()
		if err != nil {
			return err
		}
		if first {
			c.streams.Add(1)
			first = false
		}
		c.connected.Store(true)
		c.lastErr.Store("")
		var r mgmtpb.SyncResponse
		if err := sh.OpenProto(m.GetBody(), &r); err != nil {
			return fmt.Errorf("sync message: %w", err)
		}
		out, err := state.Update(proto.Clone(&r).(*mgmtpb.SyncResponse))
		if err != nil {
			return err
		}
		apply(out)
	}
}

// Streams counts the Sync streams that got their first message: live
// state management keeps per stream (connection reports) is sent again
// when it moves.
func (c *Client) Streams() uint64 { return c.streams.Load() }

// SyncMeta sends refreshed system metadata (the answers to posture checks).
func (c *Client) SyncMeta(ctx context.Context, meta *mgmtpb.PeerSystemMeta) error {
	sh, err := c.shared(ctx)
	if err != nil {
		return err
	}
	body, err := sh.SealProto(&mgmtpb.SyncMetaRequest{Meta: meta})
	if err != nil {
		return err
	}
	_, err = c.api.SyncMeta(ctx, &mgmtpb.EncryptedMessage{WgPubKey: c.priv.Public().String(), Body: body})
	return c.explain(err)
}
