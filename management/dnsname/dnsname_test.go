package dnsname

import (
	"strings"
	"testing"
)

func TestLabel(t *testing.T) {
	cases := map[string]string{
		"Laptop":                    "laptop",
		"my laptop.local":           "my-laptop",
		"--weird__name--":           "weird-name",
		"":                          "peer",
		"ünïcødé":                   "n-c-d",
		"😀":                         "peer",
		"a;rm -rf /":                "a-rm-rf",
		strings.Repeat("x", 100):    strings.Repeat("x", 63),
		"<script>alert(1)</script>": "script-alert-1-script",
	}
	for in, want := range cases {
		if got := Label(in); got != want {
			t.Errorf("Label(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestUnique(t *testing.T) {
	taken := map[string]bool{"a": true, "a-2": true}
	if got := Unique("a", func(s string) bool { return taken[s] }); got != "a-3" {
		t.Fatalf("got %q", got)
	}
	long := strings.Repeat("b", 63)
	taken = map[string]bool{long: true}
	got := Unique(long, func(s string) bool { return taken[s] })
	if len(got) > MaxLabel || !strings.HasSuffix(got, "-2") {
		t.Fatalf("got %q", got)
	}
}

func FuzzLabel(f *testing.F) {
	for _, s := range []string{"Laptop", "", "a.b.c", "ünï", "--x--"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l := Label(s)
		if l == "" || len(l) > MaxLabel || strings.HasPrefix(l, "-") || strings.HasSuffix(l, "-") {
			t.Fatalf("bad label %q from %q", l, s)
		}
		for _, r := range l {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				t.Fatalf("bad rune %q in %q", r, l)
			}
		}
	})
}
