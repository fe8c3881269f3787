// Package sockmark marks the agent's own sockets (management, signal,
// relay, STUN/TURN, WireGuard and ICE) with a firewall mark, so that the
// policy routing rules of client/routes keep them outside the tunnel when
// routes or an exit node send the rest of the host's traffic into it.
//
// On Linux it sets SO_MARK (which needs CAP_NET_ADMIN, as the agent has);
// elsewhere marking does nothing and Available reports false: those systems
// keep the agent's traffic out of the tunnel with host routes instead.
package sockmark

import (
	"context"
	"net"
	"strings"
	"syscall"
)

// Mark is the firewall mark of the agent's own traffic: the value the
// official client uses, so rules written for it keep working.
const Mark = 0x1BD00

// Control is a net.Dialer / net.ListenConfig Control function that marks
// the socket before it connects or binds. A failure to mark is not an
// error: without privileges no routes are installed either.
func Control(_, _ string, c syscall.RawConn) error {
	_ = c.Control(func(fd uintptr) { _ = setMark(fd, Mark) })
	return nil
}

// Dialer returns a dialer whose sockets carry the mark, and which looks
// names up over marked sockets too (with an exit node in use, the lookups
// of the agent's servers must not depend on the tunnel).
func Dialer() *net.Dialer { return &net.Dialer{Control: Control, Resolver: Resolver()} }

// Resolver looks names up over marked sockets where marks exist; elsewhere
// it is the system's resolver.
func Resolver() *net.Resolver {
	if !supported {
		return net.DefaultResolver
	}
	return &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
		return (&net.Dialer{Control: Control}).DialContext(ctx, network, addr)
	}}
}

// DialContext dials with a marked socket; it fits grpc.WithContextDialer,
// which hands it TCP host:port addresses or, for a unix: target, a path.
func DialContext(ctx context.Context, addr string) (net.Conn, error) {
	if strings.HasPrefix(addr, "/") || strings.HasPrefix(addr, "@") {
		return (&net.Dialer{}).DialContext(ctx, "unix", addr)
	}
	return Dialer().DialContext(ctx, "tcp", addr)
}

// Set marks an existing socket (a UDP listener: the mark applies from its
// next packet on). It reports whether the mark was set.
func Set(c syscall.Conn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	var serr error
	if err := rc.Control(func(fd uintptr) { serr = setMark(fd, Mark) }); err != nil {
		return false
	}
	return serr == nil
}

// Available reports whether this process can mark its sockets, so that
// traffic it sends bypasses routes installed behind the marking rule.
func Available() bool {
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		return false
	}
	defer c.Close()
	sc, ok := c.(syscall.Conn)
	return ok && Set(sc) && supported
}
