package addrpolicy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"
	"time"
)

func TestAllowed(t *testing.T) {
	own := netip.MustParseAddr("203.0.113.77")
	p := New([]netip.Addr{netip.MustParseAddr("198.51.200.7")}, Private, []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")})
	for _, c := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1", false}, {"::1", false}, {"169.254.169.254", false}, {"100.64.1.1", false}, {"224.0.0.1", false},
		{"10.1.2.3", false}, {"172.16.0.1", false}, {"192.168.1.1", false}, {"::ffff:127.0.0.1", false}, {"::ffff:10.0.0.1", false},
		{"fe80::1", false}, {"fd00::1", false}, {"198.51.200.7", false}, {own.String(), false},
		{"64:ff9b:1::7f00:1", false}, {"fec0::1", false},
		{"10.9.1.1", true}, {"8.8.8.8", true}, {"2606:4700::1111", true},
	} {
		if got := p.Allowed(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("Allowed(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}

// TestHTTPClient: connections to loopback are refused after resolution
// (a name resolving to loopback too), redirects included; an allowed host
// or range passes.
func TestHTTPClient(t *testing.T) {
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "secret") }))
	defer target.Close()
	_, port, _ := strings.Cut(strings.TrimPrefix(target.URL, "http://"), ":")
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+port+"/", http.StatusFound)
	}))
	defer redirect.Close()

	get := func(c *http.Client, u string) (string, error) {
		resp, err := c.Get(u)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		return string(b), err
	}
	deny := New(nil, Private, nil)
	for _, u := range []string{target.URL, "http://localhost:" + port + "/"} {
		if _, err := get(deny.HTTPClient(5*time.Second, nil), u); !errors.Is(err, ErrDenied) {
			t.Errorf("GET %s: %v, want ErrDenied", u, err)
		}
	}
	// The first hop is trusted by name; the redirect to another name
	// resolving to loopback is checked again.
	if _, err := get(deny.HTTPClient(5*time.Second, []string{"127.0.0.1"}), redirect.URL); !errors.Is(err, ErrDenied) {
		t.Errorf("redirect to loopback: %v, want ErrDenied", err)
	}
	if b, err := get(deny.HTTPClient(5*time.Second, []string{"127.0.0.1"}), target.URL); err != nil || b != "secret" {
		t.Errorf("allowed host: %q %v", b, err)
	}
	cidr := New(nil, Private, []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")})
	if b, err := get(cidr.HTTPClient(5*time.Second, nil), redirect.URL); err != nil || b != "secret" {
		t.Errorf("allowed range, through the redirect: %q %v", b, err)
	}
}
