package sshserver_test

import (
	"context"
	"testing"
	"time"
)

// FuzzJWTVerify: whatever a peer sends as the password (the token) is
// refused or verified without panicking, and only what the provider's key
// signed passes (it signed user-1's token only).
func FuzzJWTVerify(f *testing.F) {
	p := newIdP(f)
	valid := p.token(f, nil)
	f.Add(valid)
	f.Add("")
	f.Add("a.b.c")
	f.Add("eyJhbGciOiJub25lIn0.eyJzdWIiOiJ4In0.")
	f.Add(valid[:len(valid)/2])
	f.Add(valid + "x")
	v := verifier(f, p.keys, time.Hour)
	f.Fuzz(func(t *testing.T, tok string) {
		id, err := v.Verify(context.Background(), tok, "")
		if err == nil && id != "user-1" {
			t.Fatalf("accepted %q for user %q", tok, id)
		}
	})
}
