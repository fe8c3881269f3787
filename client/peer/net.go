package peer

import (
	"net"
	"syscall"

	"github.com/pion/transport/v5"
	"github.com/pion/transport/v5/stdnet"

	"github.com/wiremesh/wiremesh/internal/sockbuf"
	"github.com/wiremesh/wiremesh/internal/sockmark"
)

// bigNet is the network ICE uses for its own sockets (TURN allocations):
// the standard one, with enlarged buffers so relayed bursts are not dropped.
type bigNet struct{ *stdnet.Net }

func newNet() (transport.Net, error) {
	n, err := stdnet.NewNet()
	if err != nil {
		return nil, err
	}
	return bigNet{n}, nil
}

func (n bigNet) ListenPacket(network, address string) (net.PacketConn, error) {
	pc, err := n.Net.ListenPacket(network, address)
	if err == nil {
		sockbuf.Grow(pc)
		markConn(pc)
	}
	return pc, err
}

func (n bigNet) ListenUDP(network string, laddr *net.UDPAddr) (transport.UDPConn, error) {
	c, err := n.Net.ListenUDP(network, laddr)
	if err == nil {
		sockbuf.Grow(c)
		markConn(c)
	}
	return c, err
}

// markConn marks an ICE socket (TURN, STUN) so it stays outside the tunnel
// when routes or an exit node cover its server (client/routes).
func markConn(c any) {
	if sc, ok := c.(syscall.Conn); ok {
		sockmark.Set(sc)
	}
}

// Dial connects ICE's TCP sockets (TURN over TCP/TLS) with the mark.
func (n bigNet) Dial(network, address string) (net.Conn, error) {
	return sockmark.Dialer().Dial(network, address)
}
