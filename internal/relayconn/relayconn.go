// Package relayconn carries relay messages over the relay's two
// transports, for both ends: one message per WebSocket binary message, or
// per QUIC DATAGRAM frame (RFC 9221). It only moves whole messages; the
// protocol is in relaywire and its state in the server and client.
package relayconn

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/coder/websocket"
	"github.com/quic-go/quic-go"

	"github.com/wiremesh/wiremesh/internal/relaywire"
	"github.com/wiremesh/wiremesh/internal/sockmark"
)

// Conn is one relay connection.
type Conn interface {
	// ReadMessage returns the next whole message.
	ReadMessage(ctx context.Context) ([]byte, error)
	// WriteMessage sends one whole message.
	WriteMessage(ctx context.Context, msg []byte) error
	// Close ends the connection at once (no WebSocket close frame, as the
	// reference does; the graceful signal is the relay close message).
	Close() error
	// RemoteAddr names the other end for logs.
	RemoteAddr() string
	// Transport is "ws" or "quic".
	Transport() string
}

// Path is where the WebSocket transport is served.
const Path = "/relay"

// ALPN is the QUIC application protocol.
const ALPN = "nb-quic"

// ErrTextMessage is returned for a WebSocket text message, which the
// protocol does not allow.
var ErrTextMessage = errors.New("relay: text WebSocket message")

type wsConn struct {
	c      *websocket.Conn
	remote string
	buf    []byte // read scratch, owned by the single reader
}

// AcceptWS upgrades an HTTP request: any Origin, no subprotocol, no
// compression, messages up to the protocol maximum.
func AcceptWS(w http.ResponseWriter, r *http.Request) (Conn, error) {
	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true, CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(relaywire.MaxMessageSize)
	return &wsConn{c: c, remote: r.RemoteAddr}, nil
}

// ReadMessage reads into a scratch buffer and returns an exact-size copy:
// one allocation per message instead of a growing read-all.
func (w *wsConn) ReadMessage(ctx context.Context) ([]byte, error) {
	t, r, err := w.c.Reader(ctx)
	if err != nil {
		return nil, err
	}
	if t != websocket.MessageBinary {
		return nil, ErrTextMessage
	}
	if w.buf == nil {
		w.buf = make([]byte, relaywire.MaxMessageSize+1)
	}
	n := 0
	for {
		m, err := r.Read(w.buf[n:])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		if n == len(w.buf) {
			return nil, fmt.Errorf("%w: over %d bytes", relaywire.ErrLong, relaywire.MaxMessageSize)
		}
	}
	return append([]byte(nil), w.buf[:n]...), nil
}

func (w *wsConn) WriteMessage(ctx context.Context, msg []byte) error {
	return w.c.Write(ctx, websocket.MessageBinary, msg)
}

func (w *wsConn) Close() error       { return w.c.CloseNow() }
func (w *wsConn) RemoteAddr() string { return w.remote }
func (w *wsConn) Transport() string  { return "ws" }

type quicConn struct{ c *quic.Conn }

// WrapQUIC adapts an established QUIC connection (datagrams enabled).
func WrapQUIC(c *quic.Conn) Conn { return &quicConn{c: c} }

func (q *quicConn) ReadMessage(ctx context.Context) ([]byte, error) {
	b, err := q.c.ReceiveDatagram(ctx)
	if err != nil {
		return nil, err
	}
	if len(b) > relaywire.MaxMessageSize {
		return nil, fmt.Errorf("%w: %d bytes", relaywire.ErrLong, len(b))
	}
	return b, nil
}

func (q *quicConn) WriteMessage(_ context.Context, msg []byte) error { return q.c.SendDatagram(msg) }
func (q *quicConn) Close() error                                     { return q.c.CloseWithError(0, "normal closure") }
func (q *quicConn) RemoteAddr() string                               { return q.c.RemoteAddr().String() }
func (q *quicConn) Transport() string                                { return "quic" }

// QUICConfig is the QUIC configuration of both ends.
func QUICConfig() *quic.Config {
	return &quic.Config{
		EnableDatagrams:   true,
		InitialPacketSize: 1232,
		KeepAlivePeriod:   30 * time.Second,
		MaxIdleTimeout:    4 * time.Minute,
	}
}

// ListenQUIC serves QUIC on pc with the server's TLS config (ALPN forced).
func ListenQUIC(pc net.PacketConn, tlsConf *tls.Config) (*quic.Listener, error) {
	tc := tlsConf.Clone()
	tc.NextProtos = []string{ALPN}
	return quic.Listen(pc, tc, QUICConfig())
}

// WSURL turns a relay URL into its WebSocket URL: rel -> ws, rels -> wss,
// the path replaced by /relay.
func WSURL(relayURL string) (string, error) {
	u, err := url.Parse(relayURL)
	if err != nil {
		return "", fmt.Errorf("relay URL %q: %w", relayURL, err)
	}
	switch u.Scheme {
	case "rel":
		u.Scheme = "ws"
	case "rels":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("relay URL %q: scheme must be rel or rels", relayURL)
	}
	if u.Host == "" {
		return "", fmt.Errorf("relay URL %q has no host", relayURL)
	}
	u.Path, u.RawQuery = Path, ""
	return u.String(), nil
}

// DialWS connects to a relay URL over WebSocket. tlsConf may be nil
// (system roots).
func DialWS(ctx context.Context, relayURL string, tlsConf *tls.Config) (Conn, error) {
	wsURL, err := WSURL(relayURL)
	if err != nil {
		return nil, err
	}
	// The marked dialer keeps the agent's relay connection out of the tunnel
	// when routes or an exit node cover the relay (client/routes).
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: false, Proxy: http.ProxyFromEnvironment,
		DialContext: sockmark.Dialer().DialContext}}
	c, resp, err := websocket.Dial(ctx, wsURL, &websocket.DialOptions{HTTPClient: hc, CompressionMode: websocket.CompressionDisabled})
	if resp != nil && resp.Body != nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if err != nil {
		return nil, fmt.Errorf("relay %s: %w", relayURL, err)
	}
	c.SetReadLimit(relaywire.MaxMessageSize)
	return &wsConn{c: c, remote: strings.TrimPrefix(wsURL, "ws://")}, nil
}

// DialQUIC connects to a relay URL over QUIC (always TLS, ALPN nb-quic;
// default port 80 for rel, 443 for rels).
func DialQUIC(ctx context.Context, relayURL string, tlsConf *tls.Config) (Conn, error) {
	u, err := url.Parse(relayURL)
	if err != nil {
		return nil, fmt.Errorf("relay URL %q: %w", relayURL, err)
	}
	host := u.Host
	if u.Port() == "" {
		port := "80"
		if u.Scheme == "rels" {
			port = "443"
		}
		host = net.JoinHostPort(u.Hostname(), port)
	}
	tc := &tls.Config{}
	if tlsConf != nil {
		tc = tlsConf.Clone()
	}
	tc.NextProtos = []string{ALPN}
	if tc.ServerName == "" && net.ParseIP(u.Hostname()) == nil {
		tc.ServerName = u.Hostname()
	}
	c, err := quic.DialAddr(ctx, host, tc, QUICConfig())
	if err != nil {
		return nil, fmt.Errorf("relay %s over QUIC: %w", relayURL, err)
	}
	return WrapQUIC(c), nil
}
