package mgmtclient

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/proto/mgmtpb"
)

func compact(p netip.Prefix) []byte { return append(p.Addr().AsSlice(), byte(p.Bits())) }

func TestPeerAddresses(t *testing.T) {
	v6 := netip.MustParsePrefix("fd00:1234:5678:9abc::5/64")
	tests := []struct {
		name    string
		pc      *mgmtpb.PeerConfig
		want    Addresses
		wantErr string
	}{
		{name: "v4 only", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16"},
			want: Addresses{V4: netip.MustParsePrefix("100.77.0.5/16")}},
		{name: "v4 and v6", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(v6)},
			want: Addresses{V4: netip.MustParsePrefix("100.77.0.5/16"), V6: v6}},
		{name: "host bits kept", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("fd00::ffff/120"))},
			want: Addresses{V4: netip.MustParsePrefix("100.77.0.5/16"), V6: netip.MustParsePrefix("fd00::ffff/120")}},
		{name: "a /48", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("2001:db8:7::5/48"))},
			want: Addresses{V4: netip.MustParsePrefix("100.77.0.5/16"), V6: netip.MustParsePrefix("2001:db8:7::5/48")}},
		{name: "the internet as overlay", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("2000::1/3"))}, wantErr: "peerConfig.address_v6"},
		{name: "a /47", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("fd00::1/47"))}, wantErr: "/48 to /120"},
		{name: "a /121", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("fd00::1/121"))}, wantErr: "/48 to /120"},
		{name: "a /128", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("fd00::1/128"))}, wantErr: "peerConfig.address_v6"},
		{name: "link-local", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("fe80::5/64"))}, wantErr: "link-local"},
		{name: "multicast", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("ff02::5/64"))}, wantErr: "multicast"},
		{name: "loopback", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("::1/64"))}, wantErr: "loopback"},
		{name: "unspecified", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("::/64"))}, wantErr: "unspecified"},
		{name: "no v4", pc: &mgmtpb.PeerConfig{AddressV6: compact(v6)}, wantErr: "peerConfig.address"},
		{name: "v6 in address", pc: &mgmtpb.PeerConfig{Address: "fd00::5/64"}, wantErr: "peerConfig.address"},
		{name: "v6 too short", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(v6)[:16]}, wantErr: "peerConfig.address_v6"},
		{name: "v4 in address_v6", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: []byte{100, 77, 0, 5, 16}}, wantErr: "peerConfig.address_v6"},
		{name: "mapped v4 in address_v6", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: compact(netip.MustParsePrefix("::ffff:100.77.0.5/120"))}, wantErr: "peerConfig.address_v6"},
		{name: "length past 128", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: append(compact(v6)[:16], 129)}, wantErr: "peerConfig.address_v6"},
		{name: "length 0", pc: &mgmtpb.PeerConfig{Address: "100.77.0.5/16", AddressV6: append(compact(v6)[:16], 0)}, wantErr: "peerConfig.address_v6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := PeerAddresses(tt.pc)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PeerAddresses() error = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("PeerAddresses(): %v", err)
			}
			if got != tt.want {
				t.Fatalf("PeerAddresses() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// FuzzPeerAddresses: a PeerConfig's address bytes from the server never
// panic, and an accepted IPv6 address is what the bytes say.
func FuzzPeerAddresses(f *testing.F) {
	for _, s := range [][]byte{compact(netip.MustParsePrefix("fd00::9/64")), compact(netip.MustParsePrefix("fd00::9/128")), {100, 77, 0, 9, 32}, {}, {1, 2, 3, 4, 200},
		compact(netip.MustParsePrefix("2000::1/3")), compact(netip.MustParsePrefix("fe80::1/64")), compact(netip.MustParsePrefix("ff02::1/64")),
		compact(netip.MustParsePrefix("::ffff:100.64.0.1/120")), compact(netip.MustParsePrefix("fd00::9/48")), compact(netip.MustParsePrefix("fd00::9/120"))} {
		f.Add("100.64.0.1/16", s)
	}
	f.Fuzz(func(t *testing.T, addr string, b []byte) {
		a, err := PeerAddresses(&mgmtpb.PeerConfig{Address: addr, AddressV6: b})
		if err != nil {
			return
		}
		if !a.V4.Addr().Is4() {
			t.Fatalf("V4 = %v", a.V4)
		}
		if len(b) == 0 {
			if a.V6.IsValid() {
				t.Fatalf("V6 = %v from no bytes", a.V6)
			}
			return
		}
		if v6 := a.V6.Addr(); a.V6.Bits() < 48 || a.V6.Bits() > 120 || !v6.IsGlobalUnicast() && !v6.IsPrivate() {
			t.Fatalf("V6 %v accepted: want a unicast /48../120", a.V6)
		}
		if got := compact(a.V6); string(got) != string(b) || !a.V6.Addr().Is6() {
			t.Fatalf("V6 %v from %v (encodes back to %v)", a.V6, b, got)
		}
	})
}
