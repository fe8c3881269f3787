// Package sockbuf enlarges UDP socket buffers. Relayed and tunnelled
// traffic arrives in bursts; the kernel default (about 200 KB, and
// net.core.rmem_max caps plain SO_RCVBUF) overflows and shows up as TCP
// retransmits inside the tunnel. With CAP_NET_ADMIN the FORCE variants
// exceed the cap, as wireguard-go does for its own sockets.
package sockbuf

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Size is the buffer size asked for.
const Size = 7 << 20

// Grow enlarges the receive and send buffers of c (a *net.UDPConn or any
// syscall.Conn); it is best effort.
func Grow(c any) {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return
	}
	_ = raw.Control(func(fd uintptr) {
		for _, opt := range [][2]int{{unix.SO_RCVBUFFORCE, unix.SO_RCVBUF}, {unix.SO_SNDBUFFORCE, unix.SO_SNDBUF}} {
			if unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt[0], Size) != nil {
				_ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, opt[1], Size)
			}
		}
	})
}
