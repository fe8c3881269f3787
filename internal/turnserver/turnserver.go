// Package turnserver runs an embedded STUN/TURN server (pion/turn/v4) that
// accepts the time-limited TURN REST credentials management hands out. It
// serves UDP only; coturn remains the choice for TCP/TLS TURN.
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
	"time"

	"github.com/pion/logging"
	"github.com/pion/turn/v4"

	"github.com/wiremesh/wiremesh/internal/sockbuf"
)

// Options configure the server.
type Options struct {
	Listen  string     // UDP address, e.g. ":3478"
	RelayIP netip.Addr // address peers reach relayed allocations on
	Realm   string
	Secret  string // shared with management's credential issuer
	Log     *slog.Logger
}

// Server is a running TURN server.
type Server struct {
	srv  *turn.Server
	addr *net.UDPAddr
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
	pc, err := net.ListenPacket("udp4", o.Listen)
	if err != nil {
		return nil, fmt.Errorf("turn: listen %s: %w", o.Listen, err)
	}
	bigBuffers(pc)
	secret := []byte(o.Secret)
	auth := func(username, realm string, src net.Addr) ([]byte, bool) {
		// username is "<expiry unix seconds>" (optionally ":<name>").
		exp, err := strconv.ParseInt(strings.SplitN(username, ":", 2)[0], 10, 64)
		if err != nil || time.Now().Unix() >= exp {
			return nil, false
		}
		mac := hmac.New(sha1.New, secret)
		mac.Write([]byte(username))
		return turn.GenerateAuthKey(username, realm, base64.StdEncoding.EncodeToString(mac.Sum(nil))), true
	}
	srv, err := turn.NewServer(turn.ServerConfig{
		Realm:         o.Realm,
		AuthHandler:   auth,
		LoggerFactory: slogFactory{o.Log},
		PacketConnConfigs: []turn.PacketConnConfig{{
			PacketConn:            pc,
			RelayAddressGenerator: bufferedRelays{&turn.RelayAddressGeneratorStatic{RelayAddress: net.IP(o.RelayIP.AsSlice()), Address: "0.0.0.0"}},
		}},
	})
	if err != nil {
		pc.Close()
		return nil, fmt.Errorf("turn: %w", err)
	}
	return &Server{srv: srv, addr: pc.LocalAddr().(*net.UDPAddr)}, nil
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
