package wg

import (
	"log/slog"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/wiremesh/wiremesh/internal/sockmark"
)

// TestBindMarked: WireGuard's (and ICE's) socket carries the agent's mark,
// so routes and exit nodes never take its packets into the tunnel.
func TestBindMarked(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SO_MARK needs CAP_NET_ADMIN")
	}
	b := NewBind(slog.New(slog.DiscardHandler))
	if _, _, err := b.Open(0); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close(); b.Shutdown() }()
	b.mu.Lock()
	s := b.sock4
	b.mu.Unlock()
	if s == nil {
		t.Fatal("no IPv4 socket")
	}
	rc, err := s.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var mark int
	var gerr error
	if err := rc.Control(func(fd uintptr) { mark, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_MARK) }); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if mark != sockmark.Mark {
		t.Errorf("WireGuard socket mark %#x, want %#x", mark, sockmark.Mark)
	}
}
