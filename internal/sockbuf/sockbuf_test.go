package sockbuf

import (
	"net"
	"testing"

	"golang.org/x/sys/unix"
)

func TestGrow(t *testing.T) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	get := func() int {
		raw, _ := c.SyscallConn()
		var v int
		_ = raw.Control(func(fd uintptr) { v, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF) })
		return v
	}
	before := get()
	Grow(c)
	if after := get(); after <= before {
		t.Fatalf("receive buffer %d -> %d", before, after)
	}
}
