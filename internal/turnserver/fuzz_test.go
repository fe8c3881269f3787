package turnserver

import (
	"strings"
	"testing"
	"time"

	"github.com/pion/turn/v4"
)

// FuzzAuthKey: the TURN user name check never panics, accepts only user
// names starting with an unexpired decimal time, and then derives the key
// of the password management issues for that name.
func FuzzAuthKey(f *testing.F) {
	f.Add("1700003600", "wiremesh")
	f.Add("1700003600:peer-a", "wiremesh")
	f.Add(":", "")
	f.Add("-1:x", "r")
	f.Add("99999999999999999999", "r")
	now := time.Unix(1_700_000_000, 0)
	f.Fuzz(func(t *testing.T, user, realm string) {
		k, ok := AuthKey([]byte(secret), user, realm, now)
		if !ok {
			if k != nil {
				t.Fatal("a key for a refused user name")
			}
			return
		}
		if exp, _, _ := strings.Cut(user, ":"); exp == "" {
			t.Fatalf("accepted %q without a time", user)
		}
		want := turn.GenerateAuthKey(user, realm, password(user))
		if string(k) != string(want) {
			t.Fatalf("key of %q differs from the issued password's", user)
		}
	})
}
