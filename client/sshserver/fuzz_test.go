package sshserver

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
)

// FuzzParsePeerKey: a remote peer's key comes from the network map (what
// another agent reported): any bytes parse or fail without panicking,
// and a parsed key is never authorized unless it is the peer's.
func FuzzParsePeerKey(f *testing.F) {
	k, _ := key.NewPrivate()
	own, _ := AuthorizedKey(k)
	for _, s := range []string{own, "", " ", "ssh-ed25519", "ssh-ed25519 AAAA", "ssh-rsa AAAAB3NzaC1yc2E= x", own + "\n" + own, "\x00\xff"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		pk, err := ParsePeerKey(b)
		if err != nil || pk == nil {
			return
		}
		a := &Access{Peers: []Peer{{Name: "x", IP: netip.MustParseAddr("100.64.0.9"), Key: pk}}, AllowAll: true}
		if _, err := a.Authorize(pk, netip.MustParseAddr("100.64.0.9")); err != nil {
			t.Fatalf("the peer's own key refused: %v", err)
		}
		if _, err := a.Authorize(pk, netip.MustParseAddr("100.64.0.10")); err == nil {
			t.Fatal("a key accepted from another address")
		}
	})
}

// FuzzAcceptEnv: whatever a client sends as an env request, what is
// accepted is the locale or TERM with a value free of control
// characters and path separators.
func FuzzAcceptEnv(f *testing.F) {
	for _, s := range [][2]string{{"LANG", "C.UTF-8"}, {"LC_ALL", "de_DE"}, {"TERM", "xterm-256color"}, {"TERM", "../x"}, {"LD_PRELOAD", "/x.so"}, {"LC_", "x"}, {"LANG", "a\nb"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, value string) {
		if !acceptEnv(name, value) {
			return
		}
		if name != "LANG" && name != "TERM" && !strings.HasPrefix(name, "LC_") {
			t.Fatalf("accepted %q", name)
		}
		if strings.ContainsAny(value, "/\n\r\x00") || len(value) > 128 {
			t.Fatalf("accepted %s=%q", name, value)
		}
	})
}
