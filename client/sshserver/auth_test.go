package sshserver

import (
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/wiremesh/wiremesh/client/acl"
	"github.com/wiremesh/wiremesh/internal/key"
)

func testKey(t *testing.T) ssh.Signer {
	t.Helper()
	k, err := key.NewPrivate()
	if err != nil {
		t.Fatal(err)
	}
	s, err := HostKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestAuthorize: who gets in by the map's peers and rules.
func TestAuthorize(t *testing.T) {
	a, b, stranger := testKey(t), testKey(t), testKey(t)
	ipA, ipB := netip.MustParseAddr("100.64.0.1"), netip.MustParseAddr("100.64.0.2")
	peers := []Peer{{Name: "a.mesh", IP: ipA, Key: a.PublicKey()}, {Name: "b.mesh", IP: ipB, Key: b.PublicKey()}}
	tcp22From := func(ip netip.Addr) acl.Rule {
		return acl.Rule{Peer: ip, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}
	}
	tests := []struct {
		name    string
		access  *Access
		key     ssh.PublicKey
		from    netip.Addr
		wantErr string // "" allowed
	}{
		{"no map yet", nil, a.PublicKey(), ipA, "no network map"},
		{"no policy", &Access{Peers: peers}, a.PublicKey(), ipA, "no policy lets peer a.mesh"},
		{"tcp/22 from a", &Access{Peers: peers, Rules: []acl.Rule{tcp22From(ipA)}}, a.PublicKey(), ipA, ""},
		{"tcp/22 for b only", &Access{Peers: peers, Rules: []acl.Rule{tcp22From(ipB)}}, a.PublicKey(), ipA, "no policy"},
		{"internal port 22022", &Access{Peers: peers, Rules: []acl.Rule{{Peer: ipA, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 22022, PortHi: 22022}}}, a.PublicKey(), ipA, ""},
		{"range over 22", &Access{Peers: peers, Rules: []acl.Rule{{Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 1, PortHi: 1024}}}, a.PublicKey(), ipA, ""},
		{"all protocols", &Access{Peers: peers, Rules: []acl.Rule{{Peer: ipA, Inbound: true, Accept: true}}}, a.PublicKey(), ipA, ""},
		{"udp/22 only", &Access{Peers: peers, Rules: []acl.Rule{{Peer: ipA, Inbound: true, Accept: true, Proto: acl.ProtoUDP, PortLo: 22, PortHi: 22}}}, a.PublicKey(), ipA, "no policy"},
		{"tcp/80 only", &Access{Peers: peers, Rules: []acl.Rule{{Peer: ipA, Inbound: true, Accept: true, Proto: acl.ProtoTCP, PortLo: 80, PortHi: 80}}}, a.PublicKey(), ipA, "no policy"},
		{"outbound rule only", &Access{Peers: peers, Rules: []acl.Rule{{Peer: ipA, Accept: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}}}, a.PublicKey(), ipA, "no policy"},
		{"legacy allow-all", &Access{Peers: peers, AllowAll: true}, a.PublicKey(), ipA, ""},
		{"drop wins", &Access{Peers: peers, AllowAll: true, Rules: []acl.Rule{{Peer: ipA, Inbound: true, Proto: acl.ProtoTCP, PortLo: 22, PortHi: 22}, {Peer: ipA, Inbound: true, Proto: acl.ProtoTCP, PortLo: 22022, PortHi: 22022}}}, a.PublicKey(), ipA, "no policy"},
		{"unknown key", &Access{Peers: peers, AllowAll: true}, stranger.PublicKey(), ipA, "is no mesh peer's SSH key"},
		{"removed peer", &Access{Peers: peers[1:], AllowAll: true}, a.PublicKey(), ipA, "is no mesh peer's SSH key"},
		{"a's key from b's address", &Access{Peers: peers, AllowAll: true}, a.PublicKey(), ipB, "presented from 100.64.0.2"},
		// A hostile peer c reporting a's key, sorted first, does not lock
		// a out, and gains nothing from its own address either.
		{"duplicate key sorted first", &Access{Peers: append([]Peer{{Name: "c.mesh", IP: netip.MustParseAddr("100.64.0.3"), Key: a.PublicKey()}}, peers...), AllowAll: true}, a.PublicKey(), ipA, ""},
		{"v4-mapped source", &Access{Peers: peers, Rules: []acl.Rule{tcp22From(ipA)}}, a.PublicKey(), netip.AddrFrom16(ipA.As16()), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := tc.access.Authorize(tc.key, tc.from)
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if p.IP != tc.from.Unmap() {
					t.Errorf("peer %v, want the one at %v", p, tc.from)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want one containing %q", err, tc.wantErr)
			}
		})
	}
}

// TestHostKeyDerived: the SSH key follows the WireGuard key: the same for
// the same key (a restart keeps it), another for another key (rotation).
func TestHostKeyDerived(t *testing.T) {
	k1, _ := key.NewPrivate()
	k2, _ := key.NewPrivate()
	a1, err := AuthorizedKey(k1)
	if err != nil {
		t.Fatal(err)
	}
	a1again, _ := AuthorizedKey(k1)
	a2, _ := AuthorizedKey(k2)
	if a1 != a1again || a1 == a2 || !strings.HasPrefix(a1, "ssh-ed25519 ") {
		t.Fatalf("keys %q %q %q", a1, a1again, a2)
	}
	if k, err := ParsePeerKey([]byte(a1)); err != nil || k == nil {
		t.Fatalf("parsing own key: %v", err)
	}
	if k, err := ParsePeerKey(nil); err != nil || k != nil {
		t.Fatalf("empty key: %v %v", k, err)
	}
	if _, err := ParsePeerKey([]byte("ssh-ed25519 notbase64!")); err == nil {
		t.Fatal("garbage parsed")
	}
}

// TestLookupUser: which local users a session may run as.
func TestLookupUser(t *testing.T) {
	passwd := filepath.Join(t.TempDir(), "passwd")
	if err := os.WriteFile(passwd, []byte("root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		user      string
		allowRoot bool
		denied    []string
		wantErr   string
	}{
		{"root refused by default", "root", false, nil, "root is disabled"},
		{"root when allowed", "root", true, nil, ""},
		{"root excluded even when allowed", "root", true, []string{"root"}, "excluded"},
		{"unknown user", "no-such-user-wm", true, nil, `no local user "no-such-user-wm"`},
		{"disabled user", "nobody", true, nil, "disabled"},
		{"empty", "", true, nil, "no user name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if os.Getuid() != 0 && tc.wantErr == "" {
				t.Skip("switching users needs root; the refusals are checked without it")
			}
			_, err := lookupUser(tc.user, Options{AllowRoot: tc.allowRoot, DeniedUsers: tc.denied, Passwd: passwd, Shadow: filepath.Join(t.TempDir(), "none"), Now: time.Now})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("err %v, want %q", err, tc.wantErr)
			}
		})
	}
}

func TestAcceptEnv(t *testing.T) {
	tests := []struct {
		name, value string
		want        bool
	}{
		{"LANG", "C.UTF-8", true}, {"LC_ALL", "de_DE.UTF-8", true}, {"TERM", "xterm-256color", true},
		{"LC_", "x", false}, {"LANG", "../../x", false}, {"LANG", "a\nb", false},
		{"TERM", "../../tmp/evil", false}, {"TERM", "", false}, {"TERM", "a b", false},
		// A denylist let these through: they change how programs load.
		{"PYTHONPATH", "/tmp", false}, {"PERL5OPT", "-d", false}, {"NODE_OPTIONS", "--require=/x", false},
		{"GCONV_PATH", "/tmp", false}, {"PROMPT_COMMAND", "id", false}, {"FOO", "bar", false},
		{"LD_PRELOAD", "/evil.so", false}, {"PATH", "/tmp", false}, {"HOME", "/", false}, {"", "", false},
	}
	for _, tc := range tests {
		if got := acceptEnv(tc.name, tc.value); got != tc.want {
			t.Errorf("acceptEnv(%q, %q) = %v, want %v", tc.name, tc.value, got, tc.want)
		}
	}
}

// TestShadowState: locked and expired accounts are refused as OpenSSH
// refuses them without PAM; "*" (keys only) and no entry are not.
func TestShadowState(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	today := now.Unix() / 86400
	shadow := filepath.Join(t.TempDir(), "shadow")
	lines := []string{
		"locked:!$6$abc:19000:0:99999:7:::",
		"lockedempty:!:19000:0:99999:7:::",
		"solaris:*LK*:19000:0:99999:7:::",
		"keysonly:*:19000:0:99999:7:::",
		"expired:$6$abc:19000:0:99999:7::" + strconv.FormatInt(today, 10) + ":",
		"future:$6$abc:19000:0:99999:7::" + strconv.FormatInt(today+1, 10) + ":",
		"ok:$6$abc:19000:0:99999:7:::",
	}
	if err := os.WriteFile(shadow, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for user, want := range map[string]error{"locked": errLocked, "lockedempty": errLocked, "solaris": errLocked, "keysonly": nil,
		"expired": errExpired, "future": nil, "ok": nil, "absent": nil} {
		if err := shadowState(shadow, user, now); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("%s: %v, want %v", user, err, want)
		}
	}
	if err := shadowState(filepath.Join(t.TempDir(), "none"), "locked", now); err != nil {
		t.Errorf("no shadow file: %v", err)
	}
	if os.Getuid() == 0 {
		// lookupUser applies it: root locked in the shadow file is refused.
		locked := filepath.Join(t.TempDir(), "shadow")
		if err := os.WriteFile(locked, []byte("root:!:19000:0:99999:7:::\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := lookupUser("root", Options{AllowRoot: true, Passwd: "/etc/passwd", Shadow: locked, Now: func() time.Time { return now }})
		if !errors.Is(err, errLocked) || !errors.Is(err, errUser) {
			t.Errorf("locked root: %v", err)
		}
	}
}

// TestLogLimiter: refusals anyone can trigger log a burst a minute, then
// only a count of what was dropped.
func TestLogLimiter(t *testing.T) {
	var buf strings.Builder
	now := time.Date(2026, 12, 5, 0, 0, 0, 0, time.UTC)
	l := newLogLimiter(slog.New(slog.NewTextHandler(&buf, nil)), func() time.Time { return now })
	for range 100 {
		l.warn("ssh login refused")
	}
	if n := strings.Count(buf.String(), "ssh login refused"); n != logBurst {
		t.Fatalf("%d lines in the first minute, want %d", n, logBurst)
	}
	now = now.Add(time.Minute)
	l.warn("ssh login refused")
	if !strings.Contains(buf.String(), "suppressed_before=90") {
		t.Errorf("the next minute does not say how many were dropped:\n%s", buf.String())
	}
}
