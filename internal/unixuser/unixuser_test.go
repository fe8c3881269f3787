package unixuser

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		u    string
		want bool
	}{
		{"", true},
		{"root", true},
		{"alice.b_c-d", true},
		{"alice@example.com", true},
		{"machine$", true},
		{"$", false},
		{"a$b", false},
		{"-rf", false},
		{"a b", false},
		{"ä", false},
		{strings.Repeat("u", MaxLen), true},
		{strings.Repeat("u", MaxLen+1), false},
	} {
		if got := Valid(tc.u); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.u, got, tc.want)
		}
	}
}
