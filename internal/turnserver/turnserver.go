// Package turnserver runs an embedded STUN/TURN server (pion/turn/v4) that
// accepts the time-limited TURN REST credentials management hands out. It
// serves UDP only; coturn remains the choice for TCP/TLS TURN.
//
// It relays only to peer addresses its policy allows (see PeerPolicy): by
// default not to loopback, link-local, unspecified, multicast, broadcast
// or reserved addresses, nor the overlay range (100.64.0.0/10), nor the
// server's own addresses, so that credentials cannot be used to reach the
// server's own services. Operators add ranges to deny or allow.
package turnserver

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/pion/logging"
	"github.com/pion/turn/v4"

	"github.com/wiremesh/wiremesh/internal/metrics"
	"github.com/wiremesh/wiremesh/internal/sockbuf"
)

// Options configure the server.
type Options struct {
	Listen  string     // UDP address, e.g. ":3478"
	RelayIP netip.Addr // address peers reach relayed allocations on
	Realm   string
	Secret  string // shared with management's credential issuer
	Log     *slog.Logger

	// DeniedPeers are ranges clients may not relay to, on top of the
	// default ones (coturn's denied-peer-ip).
	DeniedPeers []netip.Prefix
	// AllowedPeers are ranges clients may relay to even when denied
	// (coturn's allowed-peer-ip), e.g. a LAN address of this host.
	AllowedPeers []netip.Prefix
	// OwnAddrs are the server's own addresses, denied as peers. Nil: the
	// addresses of every interface at start, and RelayIP.
	OwnAddrs []netip.Addr
}

// Server is a running TURN server.
type Server struct {
	srv    *turn.Server
	addr   *net.UDPAddr
	policy *PeerPolicy

	permsRefused, authRefused atomic.Int64
}

// Start listens and serves until Close.
func Start(o Options) (*Server, error) {
	if o.Secret == "" {
		return nil, fmt.Errorf("turn: a shared secret is required")
	}
	if !o.RelayIP.IsValid() {
		return nil, fmt.Errorf("turn: relay IP is required")
	}
	if o.Realm == "" {
		o.Realm = "wiremesh"
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	own := o.OwnAddrs
	if own == nil {
		var err error
		if own, err = InterfaceAddrs(); err != nil {
			return nil, fmt.Errorf("turn: the server's own addresses: %w", err)
		}
		own = append(own, o.RelayIP)
	}
	pc, err := net.ListenPacket("udp4", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("turn: listen %s: %w", o.Listen, err)
	}
	bigBuffers(pc)
	// Relayed allocations bind where the server listens: a server on
	// loopback only relays from loopback.
	bindAt := "0.0.0.0"
	if ip := pc.LocalAddr().(*net.UDPAddr).IP; !ip.IsUnspecified() {
		bindAt = ip.String()
	}
	s := &Server{addr: pc.LocalAddr().(*net.UDPAddr), policy: NewPeerPolicy(own, o.DeniedPeers, o.AllowedPeers)}
	secret := []byte(o.Secret)
	auth := func(username, realm string, src net.Addr) ([]byte, bool) {
		k, ok := AuthKey(secret, username, realm, time.Now())
		if !ok {
			s.authRefused.Add(1)
		}
		return k, ok
	}
	permit := func(client net.Addr, peer net.IP) bool {
		a, _ := netip.AddrFromSlice(peer)
		if s.policy.Allowed(a) {
			return true
		}
		s.permsRefused.Add(1)
		o.Log.Debug("TURN permission refused", "client", client.String(), "peer_ip", a.String())
		return false
	}
	srv, err := turn.NewServer(turn.ServerConfig{
		Realm:         o.Realm,
		AuthHandler:   auth,
		LoggerFactory: slogFactory{o.Log},
		PacketConnConfigs: []turn.PacketConnConfig{{
			PacketConn:            pc,
			RelayAddressGenerator: bufferedRelays{&turn.RelayAddressGeneratorStatic{RelayAddress: net.IP(o.RelayIP.AsSlice()), Address: bindAt}},
			PermissionHandler:     permit,
		}},
	})
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("turn: %w", err)
	}
	s.srv = srv
	return s, nil
}

// AuthKey is the long-term credential key of username in realm at now, for
// TURN REST credentials signed with secret: the user name is
// "<expiry unix seconds>" optionally followed by ":<name>", the password
// base64(HMAC-SHA1(secret, user name)). ok is false for a malformed or
// expired user name.
func AuthKey(secret []byte, username, realm string, now time.Time) (key []byte, ok bool) {
	exp, _, _ := strings.Cut(username, ":")
	t, err := strconv.ParseInt(exp, 10, 64)
	if err != nil || now.Unix() >= t {
		return nil, false
	}
	mac := hmac.New(sha1.New, secret)
	mac.Write([]byte(username))
	return turn.GenerateAuthKey(username, realm, base64.StdEncoding.EncodeToString(mac.Sum(nil))), true
}

// Metrics are the server's counters.
func (s *Server) Metrics() []metrics.Sample {
	return []metrics.Sample{
		{Name: "turn_permissions_refused_total", Help: "TURN permissions and channel binds refused by the peer address policy", Kind: metrics.Counter, Value: float64(s.permsRefused.Load())},
		{Name: "turn_auth_refused_total", Help: "TURN requests with a malformed or expired user name", Kind: metrics.Counter, Value: float64(s.authRefused.Load())},
	}
}

// bigBuffers raises socket buffers (see package sockbuf).
func bigBuffers(pc net.PacketConn) { sockbuf.Grow(pc) }

// bufferedRelays gives every relayed allocation socket big buffers too.
type bufferedRelays struct {
	*turn.RelayAddressGeneratorStatic
}

func (g bufferedRelays) AllocatePacketConn(network string, port int) (net.PacketConn, net.Addr, error) {
	pc, addr, err := g.RelayAddressGeneratorStatic.AllocatePacketConn(network, port)
	if err == nil {
		bigBuffers(pc)
	}
	return pc, addr, err
}

// Port is the UDP port served.
func (s *Server) Port() int { return s.addr.Port }

// Close stops the server and frees its allocations.
func (s *Server) Close() error { return s.srv.Close() }

// slogFactory routes pion's logs to slog (trace and debug are dropped).
type slogFactory struct{ log *slog.Logger }

func (f slogFactory) NewLogger(scope string) logging.LeveledLogger {
	return slogLogger{f.log.With("component", "turn", "scope", scope)}
}

type slogLogger struct{ l *slog.Logger }

func (l slogLogger) Trace(string)              {}
func (l slogLogger) Tracef(string, ...any)     {}
func (l slogLogger) Debug(m string)            { l.l.Debug(m) }
func (l slogLogger) Debugf(f string, a ...any) { l.l.Debug(fmt.Sprintf(f, a...)) }
func (l slogLogger) Info(m string)             { l.l.Debug(m) } // pion logs every unpermitted packet at info
func (l slogLogger) Infof(f string, a ...any)  { l.l.Debug(fmt.Sprintf(f, a...)) }
func (l slogLogger) Warn(m string)             { l.l.Warn(m) }
func (l slogLogger) Warnf(f string, a ...any)  { l.l.Warn(fmt.Sprintf(f, a...)) }
func (l slogLogger) Error(m string)            { l.l.Error(m) }
func (l slogLogger) Errorf(f string, a ...any) { l.l.Error(fmt.Sprintf(f, a...)) }
