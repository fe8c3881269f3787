package sockmark

import (
	"net"
	"os"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

func markOf(t *testing.T, c syscall.Conn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mark int
	var gerr error
	if err := rc.Control(func(fd uintptr) { mark, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return mark
}

// TestMarks: dialed TCP sockets and marked UDP listeners carry the mark.
func TestMarks(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_MARK needs CAP_NET_ADMIN")
	}
	if !Available() {
		t.Fatal("Available() = false as root")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			c.Close()
		}
	}()
	c, err := Dialer().Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if got := markOf(t, c.(*net.TCPConn)); got != Mark {
		t.Errorf("dialed socket mark %#x, want %#x", got, Mark)
	}
	u, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer u.Close()
	if got := markOf(t, u); got != 0 {
		t.Fatalf("fresh socket already marked %#x", got)
	}
	if !Set(u) {
		t.Fatal("Set failed as root")
	}
	if got := markOf(t, u); got != Mark {
		t.Errorf("listener mark %#x, want %#x", got, Mark)
	}
}
