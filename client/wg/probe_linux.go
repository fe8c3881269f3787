package wg

import (
	"net"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sendWithTTL sends pkt from sock with an IP_TTL control message, so the
// TTL applies to this packet only (the socket carries WireGuard too).
func sendWithTTL(sock *net.UDPConn, pkt []byte, to netip.AddrPort, ttl int) error {
	raw, err := sock.SyscallConn()
	if err != nil {
		return err
	}
	sa := &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().As4()}
	var oob []byte
	if ttl > 0 {
		oob = make([]byte, unix.CmsgSpace(4))
		h := (*unix.Cmsghdr)(unsafe.Pointer(&oob[0]))
		h.Level, h.Type = unix.IPPROTO_IP, unix.IP_TTL
		h.SetLen(unix.CmsgLen(4))
		*(*int32)(unsafe.Pointer(&oob[unix.CmsgLen(0)])) = int32(ttl)
	}
	var sendErr error
	werr := raw.Write(func(fd uintptr) bool {
		_, sendErr = unix.SendmsgN(int(fd), pkt, oob, sa, 0)
		return sendErr != unix.EAGAIN
	})
	if werr != nil {
		return werr
	}
	return sendErr
}
