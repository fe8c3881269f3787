package clientip

import (
	"net/http/httptest"
	"net/netip"
	"testing"
)

func TestResolve(t *testing.T) {
	trusted, err := ParsePrefixes([]string{"10.0.0.0/8", "192.0.2.7", "::ffff:198.51.100.1"})
	if err != nil {
		t.Fatal(err)
	}
	r := Resolver{Trusted: trusted}
	for _, tc := range []struct {
		name, peer string
		xff        []string
		want       string
	}{
		{"untrusted peer: header ignored", "203.0.113.9", []string{"198.51.100.44"}, "203.0.113.9"},
		{"trusted peer, no header", "10.1.2.3", nil, "10.1.2.3"},
		{"trusted peer: rightmost hop", "10.1.2.3", []string{"198.51.100.44"}, "198.51.100.44"},
		{"client-forged hops left of the real one are skipped", "10.1.2.3", []string{"1.1.1.1, 203.0.113.5"}, "203.0.113.5"},
		{"chained trusted proxies are walked", "192.0.2.7", []string{"203.0.113.5, 10.9.9.9", "10.0.0.1"}, "203.0.113.5"},
		{"garbage stops the walk at the last trusted hop", "10.1.2.3", []string{"203.0.113.5, nonsense"}, "10.1.2.3"},
		{"all trusted: the leftmost", "10.1.2.3", []string{"10.0.0.5, 10.0.0.6"}, "10.0.0.5"},
		{"mapped peer address", "::ffff:198.51.100.1", []string{"203.0.113.5"}, "203.0.113.5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := r.Resolve(netip.MustParseAddr(tc.peer), tc.xff)
			if got != netip.MustParseAddr(tc.want) {
				t.Fatalf("got %v, want %s", got, tc.want)
			}
		})
	}
	req := httptest.NewRequest("GET", "/", nil)
	req.RemoteAddr = "203.0.113.9:4444"
	req.Header.Set(Header, "10.0.0.1")
	if got := (Resolver{}).FromRequest(req); got != netip.MustParseAddr("203.0.113.9") {
		t.Fatalf("zero resolver believed the header: %v", got)
	}
	if _, err := ParsePrefixes([]string{"not-an-ip"}); err == nil {
		t.Fatal("a bad proxy was accepted")
	}
}
