package sockbuf

import (
	"syscall"

	"golang.org/x/sys/unix"
)

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
