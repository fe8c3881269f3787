package peer

import (
	"net"

	"github.com/pion/transport/v5"
	"github.com/pion/transport/v5/stdnet"

	"github.com/wiremesh/wiremesh/internal/sockbuf"
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
	}
	return pc, err
}

func (n bigNet) ListenUDP(network string, laddr *net.UDPAddr) (transport.UDPConn, error) {
	c, err := n.Net.ListenUDP(network, laddr)
	if err == nil {
		sockbuf.Grow(c)
	}
	return c, err
}
