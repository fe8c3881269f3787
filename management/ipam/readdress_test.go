package ipam

import (
	"errors"
	"net/netip"
	"testing"
)

func TestReaddress(t *testing.T) {
	mp := netip.MustParsePrefix
	ma := netip.MustParseAddr
	tests := []struct {
		name     string
		from, to netip.Prefix
		ips      []netip.Addr
		want     []netip.Addr
		err      error
	}{
		{"same size keeps host part", mp("100.64.0.0/16"), mp("10.20.0.0/16"),
			[]netip.Addr{ma("100.64.1.5"), ma("100.64.200.9")}, []netip.Addr{ma("10.20.1.5"), ma("10.20.200.9")}, nil},
		{"smaller range packs the ones that do not fit", mp("100.64.0.0/16"), mp("192.168.7.0/24"),
			[]netip.Addr{ma("100.64.0.3"), ma("100.64.9.1"), ma("100.64.0.255")}, []netip.Addr{ma("192.168.7.3"), ma("192.168.7.1"), ma("192.168.7.2")}, nil},
		{"overlapping ranges", mp("10.0.0.0/24"), mp("10.0.0.0/25"),
			[]netip.Addr{ma("10.0.0.200"), ma("10.0.0.1")}, []netip.Addr{ma("10.0.0.2"), ma("10.0.0.1")}, nil},
		{"too small", mp("100.64.0.0/16"), mp("10.0.0.0/30"),
			[]netip.Addr{ma("100.64.0.1"), ma("100.64.0.2"), ma("100.64.0.3")}, nil, ErrFull},
		{"exactly full", mp("100.64.0.0/16"), mp("10.0.0.0/30"),
			[]netip.Addr{ma("100.64.0.9"), ma("100.64.0.2")}, []netip.Addr{ma("10.0.0.1"), ma("10.0.0.2")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Readdress(tt.from, tt.to, tt.ips)
			if !errors.Is(err, tt.err) {
				t.Fatalf("err = %v, want %v", err, tt.err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}
