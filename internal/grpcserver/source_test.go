package grpcserver

import (
	"net"
	"net/netip"
	"testing"
)

// TestSourceOf: IPv6 clients are counted per /64, IPv4 (also mapped into
// IPv6) and loopback per address.
func TestSourceOf(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"192.0.2.7", "192.0.2.7"},
		{"::ffff:192.0.2.7", "192.0.2.7"},
		{"2001:db8:1:2:aaaa::1", "2001:db8:1:2::"},
		{"2001:db8:1:2:bbbb::9", "2001:db8:1:2::"},
		{"::1", "::1"}, // loopback is exempt from the per-source cap and stays recognisable
	} {
		got := sourceOf(&net.TCPAddr{IP: net.ParseIP(c.in), Port: 443})
		if got != netip.MustParseAddr(c.want) {
			t.Errorf("sourceOf(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}
