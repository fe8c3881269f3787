package peer

import (
	"net"
	"net/netip"

	"github.com/pion/ice/v4"
)

// Mux is the ICE UDP mux on the shared WireGuard socket. It hides
// addresses that must never be candidates: loopback and the overlay itself
// (a check sent to an overlay address would loop through the tunnel).
type Mux struct {
	*ice.UniversalUDPMuxDefault
	exclude netip.Prefix
}

// NewMux wraps conn (the STUN side of the shared socket).
func NewMux(conn net.PacketConn, exclude netip.Prefix) *Mux {
	return &Mux{UniversalUDPMuxDefault: ice.NewUniversalUDPMuxDefault(ice.UniversalUDPMuxParams{UDPConn: conn}), exclude: exclude}
}

// GetListenAddresses implements ice.UDPMux.
func (m *Mux) GetListenAddresses() []net.Addr {
	var out []net.Addr
	for _, a := range m.UniversalUDPMuxDefault.GetListenAddresses() {
		ua, ok := a.(*net.UDPAddr)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ua.IP)
		if !ok || !usableIP(ip.Unmap(), m.exclude) {
			continue
		}
		out = append(out, a)
	}
	return out
}

func usableIP(ip netip.Addr, exclude netip.Prefix) bool {
	return ip.Is4() && !ip.IsLoopback() && !ip.IsLinkLocalUnicast() && !ip.IsUnspecified() && !exclude.Contains(ip)
}
