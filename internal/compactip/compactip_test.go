package compactip

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
)

func TestRoundTrip(t *testing.T) {
	tests := []struct {
		in   string
		want []byte
	}{
		{"100.64.0.5/32", []byte{100, 64, 0, 5, 32}},
		{"0.0.0.0/0", []byte{0, 0, 0, 0, 0}},
		{"fd00:1234::5/64", []byte{0xfd, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 64}},
		{"::/0", append(make([]byte, 16), 0)},
		{"::ffff:10.0.0.1/128", []byte{10, 0, 0, 1, 32}},
	}
	for _, tc := range tests {
		p := netip.MustParsePrefix(tc.in)
		got := Prefix(p)
		if !bytes.Equal(got, tc.want) {
			t.Errorf("Prefix(%s) = %v, want %v", tc.in, got, tc.want)
		}
		back, err := Parse(got)
		if err != nil {
			t.Fatalf("Parse(%v): %v", got, err)
		}
		if want := netip.PrefixFrom(p.Addr().Unmap(), min(p.Bits(), p.Addr().Unmap().BitLen())); p.Addr().Is4In6() && back != want || !p.Addr().Is4In6() && back != p {
			t.Errorf("round trip of %s gives %s", tc.in, back)
		}
	}
	if Prefix(netip.Prefix{}) != nil || Prefix(netip.MustParsePrefix("::ffff:0:0/90")) != nil {
		t.Error("unencodable prefixes encoded")
	}
	if got := Addr(netip.MustParseAddr("fd00::1")); len(got) != 17 || got[16] != 128 {
		t.Errorf("Addr(fd00::1) = %v", got)
	}
}

func TestParseRejects(t *testing.T) {
	for _, b := range [][]byte{nil, {1, 2, 3, 4}, {1, 2, 3, 4, 33}, append(make([]byte, 16), 129), make([]byte, 18)} {
		if _, err := Parse(b); !errors.Is(err, ErrMalformed) {
			t.Errorf("Parse(%v) = %v, want ErrMalformed", b, err)
		}
	}
}

// FuzzParse: whatever the bytes, Parse either refuses them or gives a
// prefix that encodes back to them.
func FuzzParse(f *testing.F) {
	f.Add([]byte{100, 64, 0, 5, 32})
	f.Add(append(make([]byte, 16), 0))
	f.Add([]byte{0xfd, 0, 0x12, 0x34, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 5, 64})
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		p, err := Parse(b)
		if err != nil {
			return
		}
		if len(b) == 17 && p.Addr().Is4In6() {
			return // a mapped address is encoded as IPv4
		}
		if got := Prefix(p); !bytes.Equal(got, b) {
			t.Fatalf("Parse(%v) = %s, encodes back to %v", b, p, got)
		}
	})
}
