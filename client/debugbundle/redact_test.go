package debugbundle

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const privKey = "qBCdJ5eM5nC+7Zc1o4tVR0+ZkVz8yE0Lh7dN8Xy2b2M="

func TestRedact(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"setup key", "up with key 6F1C9A4E-0C5B-4C1E-9A55-2B7C1F0E9D10, then key=abc-def",
			"up with key (redacted-uuid), then key=abc-def"},
		{"lower-case uuid", "id 2b7c1f0e-9d10-4c1e-9a55-6f1c9a4e0c5b.", "id (redacted-uuid)."},
		{"not a uuid", "build 2b7c1f0e-9d10-4c1e-9a55", "build 2b7c1f0e-9d10-4c1e-9a55"},
		{"private key literal", "loaded key " + privKey + " ok", "loaded key (redacted) ok"},
		{"private key json", `{"private_key": "` + privKey + `"}`, `{"private_key": "(redacted)"}`},
		{"preshared key pair", "psk=c2VjcmV0c2VjcmV0c2VjcmV0 peer=a", "psk=(redacted) peer=a"},
		{"presharedKey json", `"preSharedKey":"abc def"`, `"preSharedKey":"(redacted)"`},
		{"setup key pair", "setup_key=ABCDEF123 next", "setup_key=(redacted) next"},
		{"setupKey camel", `setupKey: "XYZ"`, `setupKey: "(redacted)"`},
		{"password pair", "password=hunter2&user=bob", "password=(redacted)&user=bob"},
		{"token pair", `msg="login" access_token=abcdef.ghij`, `msg="login" access_token=(redacted)`},
		{"empty secret kept", `password=""`, `password=""`},
		{"jwt", "got eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiIxMjM0In0.c2lnbmF0dXJl end", "got (redacted-jwt) end"},
		{"bearer", "Authorization: Bearer abcdefghijklmnop", "Authorization: Bearer (redacted)"},
		{"pat", "nbp_" + strings.Repeat("a1", 18) + " used", "(redacted) used"},
		{"url password", "turn://user:s3cret@turn.example.com:3478", "turn://user:(redacted)@turn.example.com:3478"},
		{"url without password", "https://user@example.com/x", "https://user@example.com/x"},
		{"ordinary text", "peer connected via relay, latency 12ms", "peer connected via relay, latency 12ms"},
		{"public ip kept without anonymize", "endpoint 8.8.8.8:51820", "endpoint 8.8.8.8:51820"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := NewScrubber(false, privKey).String(c.in)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Scrub(%q) (-want +got):\n%s", c.in, diff)
			}
		})
	}
}

func TestAnonymize(t *testing.T) {
	cases := []struct {
		name, in, want string
	}{
		{"public ipv4", "endpoint 8.8.8.8:51820", "endpoint 240.0.0.1:51820"},
		{"same ip same placeholder", "a 1.1.1.1 b 9.9.9.9 c 1.1.1.1", "a 240.0.0.1 b 240.0.0.2 c 240.0.0.1"},
		{"end of sentence", "connected to 8.8.4.4.", "connected to 240.0.0.1."},
		{"overlay kept", "peer 100.64.0.7 and 100.127.255.1", "peer 100.64.0.7 and 100.127.255.1"},
		{"private kept", "lan 192.168.1.10 10.0.0.1 172.16.5.4 127.0.0.1 169.254.1.1", "lan 192.168.1.10 10.0.0.1 172.16.5.4 127.0.0.1 169.254.1.1"},
		{"version not an ip", "version 1.2.3.4.5 and v0.77.1", "version 1.2.3.4.5 and v0.77.1"},
		{"public ipv6", "from [2a00:1450:4001:82b::200e]:443", "from [2001:db8::1]:443"},
		{"ipv6 ula", "ula fd12:3456:789a::1", "ula 2001:db8::1"},
		{"ipv6 link local kept", "ll fe80::1%eth0", "ll fe80::1%eth0"},
		{"time not ipv6", "at 23:15:01.123 mac aa:bb:cc:dd:ee:ff", "at 23:15:01.123 mac aa:bb:cc:dd:ee:ff"},
		{"domain", "management https://mgmt.example.com:443 and mgmt.example.com", "management https://anon-1.domain.invalid:443 and anon-1.domain.invalid"},
		{"two domains", "a.example.org b.example.net a.example.org", "anon-1.domain.invalid anon-2.domain.invalid anon-1.domain.invalid"},
		{"peer fqdn", "peer laptop.netbird.selfhosted connected", "peer anon-1.domain.invalid connected"},
		{"files and code kept", "main.go:12 config.json /var/log/netbird/client.log slog.Logger time.Now()", "main.go:12 config.json /var/log/netbird/client.log slog.Logger time.Now()"},
		{"email", "user alice@example.com logged in, alice@example.com again", "user user-1@anon.invalid logged in, user-1@anon.invalid again"},
		{"host name", "hostname=myhost peer myhost.corp.lan", "hostname=anon-host-1 peer anon-1.domain.invalid"},
		{"secrets still go", "password=x1 to 8.8.8.8", "password=(redacted) to 240.0.0.1"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewScrubber(true)
			s.AddNames("myhost")
			got := s.String(c.in)
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("Scrub(%q) (-want +got):\n%s", c.in, diff)
			}
		})
	}
}

func TestAnonymizeStrict(t *testing.T) {
	const pub = "HxvQWj1AEW+ZzmMq9qj5x0b8U5iuD7uZ0Fh3XoLRWmA="
	cases := []struct {
		name, in, want string
	}{
		{"private and overlay go", "lan 192.168.1.10 overlay 100.64.0.7 public 8.8.8.8", "lan 240.0.0.1 overlay 240.0.0.2 public 240.0.0.3"},
		{"loopback and link-local stay", "127.0.0.1 fe80::1", "127.0.0.1 fe80::1"},
		{"wireguard keys", "peer=" + pub + " again " + pub, "peer=(wg-key-1) again (wg-key-1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := NewScrubber(true)
			s.SetStrict()
			if diff := cmp.Diff(c.want, s.String(c.in)); diff != "" {
				t.Errorf("Scrub(%q) (-want +got):\n%s", c.in, diff)
			}
		})
	}
}

// One scrubber keeps its placeholders across the files of a bundle.
func TestAnonymizeConsistentAcrossCalls(t *testing.T) {
	s := NewScrubber(true)
	a := s.String("status: relay 203.0.114.9 at relay.example.com")
	b := s.String("log: dial relay.example.com (203.0.114.9) and 198.18.0.1")
	want := []string{"status: relay 240.0.0.1 at anon-1.domain.invalid", "log: dial anon-1.domain.invalid (240.0.0.1) and 240.0.0.2"}
	if diff := cmp.Diff(want, []string{a, b}); diff != "" {
		t.Fatalf("(-want +got):\n%s", diff)
	}
}

func TestPublic(t *testing.T) {
	cases := map[string]bool{
		"8.8.8.8": true, "2a00:1450::1": true, "fd00::1": true, "::ffff:8.8.8.8": true,
		"10.1.2.3": false, "100.64.0.1": false, "127.0.0.1": false, "192.0.2.1": false, "240.0.0.1": false,
		"::1": false, "fe80::1": false, "2001:db8::1": false, "0.0.0.0": false, "224.0.0.1": false,
	}
	for in, want := range cases {
		if got := Public(netip.MustParseAddr(in)); got != want {
			t.Errorf("Public(%s) = %v, want %v", in, got, want)
		}
	}
}

func FuzzScrub(f *testing.F) {
	f.Add("endpoint 8.8.8.8:51820 password=x https://u:p@a.example.com fd00::1")
	f.Fuzz(func(t *testing.T, in string) {
		s := NewScrubber(true, privKey)
		out := s.String(in + " 8.8.8.8 " + privKey)
		if strings.Contains(out, privKey) {
			t.Fatalf("private key survived: %q", out)
		}
		if strings.Contains(out, " 8.8.8.8 ") {
			t.Fatalf("public address survived: %q", out)
		}
	})
}

func BenchmarkScrub(b *testing.B) {
	line := `time=2026-12-04T23:15:01.123Z level=DEBUG msg="ICE candidate" peer=qBCdJ5eM5nC+7Zc1o4tVR0+ZkVz8yE0Lh7dN8Xy2b2M= endpoint=8.8.8.8:51820 relay=rels://relay.example.com:443 local=192.168.1.10:51820` + "\n"
	in := []byte(strings.Repeat(line, (1<<20)/len(line)))
	for _, anon := range []bool{false, true} {
		b.Run(map[bool]string{false: "redact", true: "anonymize"}[anon], func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				NewScrubber(anon, privKey).Scrub(in)
			}
		})
	}
}
