//go:build !linux

package wg

import (
	"net"
	"net/netip"
)

// sendWithTTL sends pkt from sock. A per-packet TTL needs Linux's IP_TTL
// control message; elsewhere TTL-limited probes are refused, which turns
// the keeper side of hole punching off (ICE and the relay still work).
func sendWithTTL(sock *net.UDPConn, pkt []byte, to netip.AddrPort, ttl int) error {
	if ttl > 0 {
		return ErrNoTTL
	}
	_, err := sock.WriteToUDPAddrPort(pkt, to)
	return err
}
