package wg

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"unsafe"

	"github.com/wiremesh/wiremesh/internal/key"
)

// Probes are the agent's own hole-punching packets on the WireGuard
// socket: a byte WireGuard (1-4) and STUN (0x00-0x3f) never use, a magic,
// then a body of ProbeBodyLen bytes that package peer defines and
// authenticates: the bind only frames and routes them.
const (
	probeByte    = 0xf1
	probeHdrLen  = 3
	ProbeBodyLen = 1 + key.Size + 16 // kind, sender, MAC
	probeLen     = probeHdrLen + ProbeBodyLen
)

var probeMagic = [2]byte{'w', 'm'}

// ProbeHandler receives a probe body and where it came from. It runs on
// WireGuard's receive path and must not block.
type ProbeHandler func(from netip.AddrPort, body []byte)

func isProbe(p []byte) bool {
	return len(p) == probeLen && p[0] == probeByte && p[1] == probeMagic[0] && p[2] == probeMagic[1]
}

func (b *Bind) deliverProbe(p []byte, from netip.AddrPort) {
	b.mu.Lock()
	h := b.probes
	b.mu.Unlock()
	if h != nil {
		h(from, append([]byte(nil), p[probeHdrLen:]...))
	}
}

// SetProbeHandler installs the receiver of probes.
func (b *Bind) SetProbeHandler(h ProbeHandler) {
	b.mu.Lock()
	b.probes = h
	b.mu.Unlock()
}

// ErrNoTTL is returned where probes with a chosen TTL cannot be sent.
var ErrNoTTL = errors.New("cannot send packets with a chosen TTL on this socket")

// SendProbe sends a probe body from our WireGuard port to to. With ttl > 0
// the packet carries that IP TTL: ttl 1 refreshes our own NAT's mapping
// without reaching the remote NAT.
func (b *Bind) SendProbe(to netip.AddrPort, body []byte, ttl int) error {
	if len(body) != ProbeBodyLen {
		return fmt.Errorf("probe body of %d bytes, want %d", len(body), ProbeBodyLen)
	}
	pkt := append([]byte{probeByte, probeMagic[0], probeMagic[1]}, body...)
	b.mu.Lock()
	sock := b.sock4
	b.mu.Unlock()
	if sock == nil {
		return ErrNoTTL
	}
	a4 := to.Addr().Unmap()
	if !a4.Is4() {
		return fmt.Errorf("probe to %s: IPv4 only", to)
	}
	return sendWithTTL(sock, pkt, netip.AddrPortFrom(a4, to.Port()), ttl)
}

// ipv4Socket returns the IPv4 socket inside wireguard-go's standard bind.
// The bind does not export it (only on Android), and probes need to send
// from exactly that socket with a chosen TTL; if its layout ever changes
// this returns nil and hole punching beyond ICE is simply off.
func ipv4Socket(std any) *net.UDPConn {
	v := reflect.ValueOf(std)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("ipv4")
	if !f.IsValid() || f.Type() != reflect.TypeOf((*net.UDPConn)(nil)) {
		return nil
	}
	return *(**net.UDPConn)(unsafe.Pointer(f.UnsafeAddr()))
}
