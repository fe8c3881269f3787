package key_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/wiremesh/wiremesh/internal/key"
)

// Text of the right length that decodes to more than 32 bytes (no
// padding) used to panic inside base64 and take the server down with it.
func TestParseRefusesOverlongText(t *testing.T) {
	for _, s := range []string{
		"rJCUs0hLK4ndZCMQKB4UbXR05x/2AmfTPeqRyuo/YXE0",
		strings.Repeat("A", 44),
		"",
		strings.Repeat("=", 44),
	} {
		if _, err := key.ParsePublic(s); !errors.Is(err, key.ErrInvalid) {
			t.Errorf("ParsePublic(%q): %v, want ErrInvalid", s, err)
		}
		if _, err := key.ParsePrivate(s); !errors.Is(err, key.ErrInvalid) {
			t.Errorf("ParsePrivate(%q): %v, want ErrInvalid", s, err)
		}
	}
	k, _ := key.NewPrivate()
	if got, err := key.ParsePublic(k.Public().String()); err != nil || got != k.Public() {
		t.Fatalf("round trip: %v", err)
	}
}

// FuzzParsePublic: any text parses or is refused; what parses prints back
// as itself.
func FuzzParsePublic(f *testing.F) {
	k, _ := key.NewPrivate()
	f.Add(k.Public().String())
	f.Add("rJCUs0hLK4ndZCMQKB4UbXR05x/2AmfTPeqRyuo/YXE0")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := key.ParsePublic(s)
		if err == nil && p.String() != s {
			t.Fatalf("%q parsed to %q", s, p.String())
		}
	})
}
