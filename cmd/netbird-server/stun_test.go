package main

import (
	"net/netip"
	"testing"
)

// TestListenSTUN: STUN/TURN binds the host of --listen (a server on
// loopback does not open UDP on every interface) unless --stun-listen says
// otherwise, or the server sits on loopback behind a proxy and advertises a
// public host: the documented `--listen 127.0.0.1:33073 --public-url
// https://vpn.example.com` must not advertise vpn.example.com:3478 while
// STUN listens on 127.0.0.1.
func TestListenSTUN(t *testing.T) {
	for _, c := range []struct {
		explicit, listen, public string
		port                     int
		want                     string
	}{
		{"", "127.0.0.1:33073", "", 3478, "127.0.0.1:3478"},
		{"", "127.0.0.1:33073", "localhost", 3478, "127.0.0.1:3478"},
		{"", "[::1]:33073", "", 3478, "[::1]:3478"},
		{"", ":33073", "", 3478, ":3478"},
		{"", "127.0.0.1:33073", "vpn.example.com", 3478, ":3478"},
		{"", "[::1]:33073", "203.0.113.7", 3479, ":3479"},
		{"", "192.0.2.1:33073", "vpn.example.com", 3478, "192.0.2.1:3478"},
		{"0.0.0.0:3479", "127.0.0.1:33073", "vpn.example.com", 3478, "0.0.0.0:3479"},
	} {
		if got := stunListen(c.explicit, c.listen, c.public, c.port); got != c.want {
			t.Errorf("stunListen(%q, %q, %q, %d) = %q, want %q", c.explicit, c.listen, c.public, c.port, got, c.want)
		}
	}
	// Through the flags: the reverse-proxy setup of docs/operations.md.
	p, err := plan(listenFlags{listen: "127.0.0.1:33073", publicURL: "https://vpn.example.com"})
	if err != nil {
		t.Fatal(err)
	}
	if got := stunListen("", p.Listen, p.PublicHost, 3478); got != ":3478" {
		t.Errorf("--listen 127.0.0.1:33073 --public-url https://vpn.example.com: STUN on %q, want :3478", got)
	}
}

func TestPeerIPFlags(t *testing.T) {
	got, err := prefixes("--turn-denied-peer-ip", []string{"10.0.0.0/8", "192.168.1.7", "10.1.2.3/16"})
	if err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.1.7/32"), netip.MustParsePrefix("10.1.0.0/16")}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	if _, err := prefixes("--turn-denied-peer-ip", []string{"10.0.0.0/33"}); err == nil {
		t.Fatal("a bad CIDR accepted")
	}
}
