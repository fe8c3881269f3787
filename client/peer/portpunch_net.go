package peer

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"time"

	"github.com/pion/stun/v4"
	"golang.org/x/net/ipv4"

	"github.com/wiremesh/wiremesh/internal/sockbuf"
)

// errNoTTLHere: this system cannot set the TTL of our socket; refresh
// probes are skipped (the mapping then lives as long as the NAT keeps an
// unreplied entry, which is long enough on most routers).
var errNoTTLHere = errors.New("cannot set the TTL on this socket")

// udpPunchConn is the real fresh socket.
type udpPunchConn struct {
	*net.UDPConn
	mu   sync.Mutex // serialises TTL changes with their write
	p    *ipv4.PacketConn
	base int // the socket's default TTL
}

func listenPunch() (punchConn, error) {
	c, err := net.ListenUDP("udp4", &net.UDPAddr{})
	if err != nil {
		return nil, fmt.Errorf("listen udp4: %w", err)
	}
	sockbuf.Grow(c)
	markConn(c)
	u := &udpPunchConn{UDPConn: c, p: ipv4.NewPacketConn(c)}
	if u.base, err = u.p.TTL(); err != nil || u.base <= 0 {
		u.base = 64
	}
	return u, nil
}

func (u *udpPunchConn) WriteTTL(b []byte, to netip.AddrPort, ttl int) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	if ttl > 0 {
		if err := u.p.SetTTL(ttl); err != nil {
			return fmt.Errorf("%w: %w", errNoTTLHere, err)
		}
		defer func() { _ = u.p.SetTTL(u.base) }()
	}
	_, err := u.WriteToUDPAddrPort(b, to)
	return err
}

// stunMapped asks the first STUN server of urls for the socket's public
// address, three times at most.
func stunMapped(urls func() []*stun.URI) func(ctx context.Context, pc punchConn) (netip.AddrPort, error) {
	return func(ctx context.Context, pc punchConn) (netip.AddrPort, error) {
		var server *net.UDPAddr
		for _, u := range urls() {
			if u.Scheme != stun.SchemeTypeSTUN || (u.Proto != stun.ProtoTypeUDP && u.Proto != stun.ProtoTypeUnknown) {
				continue
			}
			a, err := net.ResolveUDPAddr("udp4", net.JoinHostPort(u.Host, strconv.Itoa(u.Port)))
			if err != nil {
				continue
			}
			server = a
			break
		}
		if server == nil {
			return netip.AddrPort{}, errors.New("no usable STUN server (stun: URL over UDP)")
		}
		buf := make([]byte, 1500)
		for try := 0; try < 3; try++ {
			req := stun.MustBuild(stun.TransactionID, stun.BindingRequest)
			if _, err := pc.WriteTo(req.Raw, server); err != nil {
				return netip.AddrPort{}, fmt.Errorf("STUN request to %s: %w", server, err)
			}
			_ = pc.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
			for {
				n, _, err := pc.ReadFrom(buf)
				if err != nil {
					break
				}
				m := &stun.Message{Raw: append([]byte(nil), buf[:n]...)}
				if m.Decode() != nil || m.TransactionID != req.TransactionID {
					continue
				}
				var x stun.XORMappedAddress
				if err := x.GetFrom(m); err != nil {
					return netip.AddrPort{}, fmt.Errorf("STUN answer from %s: %w", server, err)
				}
				ip, ok := netip.AddrFromSlice(x.IP)
				if !ok {
					return netip.AddrPort{}, fmt.Errorf("STUN answer from %s: bad address %v", server, x.IP)
				}
				return netip.AddrPortFrom(ip.Unmap(), uint16(x.Port)), nil
			}
			if ctx.Err() != nil {
				return netip.AddrPort{}, ctx.Err()
			}
		}
		return netip.AddrPort{}, fmt.Errorf("no STUN answer from %s", server)
	}
}
