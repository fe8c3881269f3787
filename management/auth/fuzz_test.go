package auth

import (
	"errors"
	"testing"
	"unicode/utf8"
)

// FuzzParseClaims reads arbitrary token payloads: the result is claims
// with a subject, or ErrInvalid, never a panic; groups are non-empty
// strings and the issue time is within the bounds a timestamp may have.
func FuzzParseClaims(f *testing.F) {
	for _, s := range []string{
		`{"sub":"a|1","email":"a@example.com","email_verified":true,"name":"A","iat":1767225600,"jti":"j1","groups":["x","y"]}`,
		`{"sub":"b","email_verified":"true","preferred_username":"b@example.com","groups":"one"}`,
		`{"sub":"c","iat":1e300}`,
		`{"sub":"","email":"x"}`,
		`[1,2]`,
		`null`,
	} {
		f.Add([]byte(s), "groups")
	}
	f.Fuzz(func(t *testing.T, payload []byte, groupsClaim string) {
		c, err := ParseClaims(payload, groupsClaim)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v is not ErrInvalid", err)
			}
			return
		}
		if c.Subject == "" {
			t.Fatal("claims without a subject")
		}
		for _, g := range c.Groups {
			if g == "" {
				t.Fatalf("empty group in %q", c.Groups)
			}
		}
		if !c.IssuedAt.IsZero() && (c.IssuedAt.Unix() < 0 || c.IssuedAt.Unix() > maxUnix) {
			t.Fatalf("issued at %v", c.IssuedAt)
		}
		if utf8.ValidString(string(payload)) && !utf8.ValidString(c.Subject) {
			t.Fatalf("subject %q is not UTF-8", c.Subject)
		}
	})
}

// TestParseClaims pins what management reads, email_verified included.
func TestParseClaims(t *testing.T) {
	c, err := ParseClaims([]byte(`{"sub":"s","email":" a@example.com ","email_verified":"TRUE","preferred_username":"p","iat":1767225600,"jti":"j","roles":["r",""]}`), "roles")
	if err != nil {
		t.Fatal(err)
	}
	if c.Subject != "s" || c.Email != "a@example.com" || !c.EmailVerified || c.Name != "p" || c.TokenID != "j" || c.IssuedAt.Unix() != 1767225600 ||
		len(c.Groups) != 1 || c.Groups[0] != "r" {
		t.Fatalf("claims %+v", c)
	}
	if c, _ := ParseClaims([]byte(`{"sub":"s","email_verified":1}`), "groups"); c.EmailVerified {
		t.Fatal("a number counts as a verified address")
	}
	for _, bad := range []string{`{"sub":"s","iat":-1}`, `{"sub":"s","iat":1e300}`, `{"email":"x"}`, `"s"`} {
		if _, err := ParseClaims([]byte(bad), "groups"); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", bad, err)
		}
	}
}
