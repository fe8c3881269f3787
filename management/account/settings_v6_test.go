package account

import (
	"errors"
	"net/netip"
	"testing"
)

func TestParseNetworkRangeV6(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" means refused
	}{
		{"fd00:1234:5678::/64", "fd00:1234:5678::/64"},
		{" fd00:1234:5678:9:1::/64 ", "fd00:1234:5678:9::/64"},
		{"fd00:1::/48", "fd00:1::/48"},
		{"fd00::/120", "fd00::/120"},
		{"2001:db8::/56", "2001:db8::/56"},
		{"fd00::/47", ""},
		{"fd00::/121", ""},
		{"100.64.0.0/16", ""},
		{"::ffff:10.0.0.0/104", ""},
		{"fe80::/64", ""},
		{"ff00::/64", ""},
		{"::/64", ""},
		{"::1/128", ""},
		{"nonsense", ""},
	}
	for _, tc := range tests {
		got, err := ParseNetworkRangeV6(tc.in)
		if tc.want == "" {
			if err == nil || !errors.Is(err, ErrBadSettings) {
				t.Errorf("ParseNetworkRangeV6(%q) = %s, %v; want ErrBadSettings", tc.in, got, err)
			}
			continue
		}
		if err != nil || got != netip.MustParsePrefix(tc.want) {
			t.Errorf("ParseNetworkRangeV6(%q) = %s, %v; want %s", tc.in, got, err, tc.want)
		}
	}
}

func TestSupportsIPv6(t *testing.T) {
	for _, tc := range []struct {
		overlay, disabled, want bool
	}{{false, false, false}, {true, false, true}, {true, true, false}, {false, true, false}} {
		p := Peer{Meta: Meta{IPv6Overlay: tc.overlay, Flags: LocalFlags{DisableIPv6: tc.disabled}}}
		if got := p.SupportsIPv6(); got != tc.want {
			t.Errorf("overlay %v disabled %v: SupportsIPv6 = %v, want %v", tc.overlay, tc.disabled, got, tc.want)
		}
	}
}

// FuzzParseNetworkRangeV6: whatever an API client sends, an accepted
// range is a masked IPv6 unicast prefix within the bounds.
func FuzzParseNetworkRangeV6(f *testing.F) {
	for _, s := range []string{"fd00:1234:5678::/64", "fd00::/48", "fd00::/120", "2001:db8::/56", "fe80::/64", "::ffff:10.0.0.0/104",
		"100.64.0.0/10", "fd00::%eth0/64", "", "/", "fd00::/64/64", " fd00::/64 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseNetworkRangeV6(s)
		if err != nil {
			if !errors.Is(err, ErrBadSettings) {
				t.Fatalf("%q: error %v is not ErrBadSettings", s, err)
			}
			return
		}
		a := p.Addr()
		if !a.Is6() || a.Is4In6() || a.Zone() != "" || p != p.Masked() || p.Bits() < MinNetworkV6Bits || p.Bits() > MaxNetworkV6Bits ||
			a.IsLoopback() || a.IsMulticast() || a.IsLinkLocalUnicast() {
			t.Fatalf("%q accepted as %s", s, p)
		}
	})
}
