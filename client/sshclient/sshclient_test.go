package sshclient

import "testing"

func TestParseForward(t *testing.T) {
	tests := []struct {
		in, listen, target string
		bad                bool
	}{
		{in: "8080:localhost:80", listen: "127.0.0.1:8080", target: "localhost:80"},
		{in: "0.0.0.0:8080:10.0.0.1:80", listen: "0.0.0.0:8080", target: "10.0.0.1:80"},
		{in: "[::1]:8080:[fd00::1]:80", listen: "[::1]:8080", target: "[fd00::1]:80"},
		{in: "8080:localhost", bad: true},
		{in: "x:localhost:80", bad: true},
		{in: "8080:localhost:70000", bad: true},
		{in: "", bad: true},
	}
	for _, tc := range tests {
		f, err := ParseForward(tc.in)
		if tc.bad {
			if err == nil {
				t.Errorf("%q: accepted as %+v", tc.in, f)
			}
			continue
		}
		if err != nil || f.Listen != tc.listen || f.Target != tc.target {
			t.Errorf("%q: %+v %v, want %s -> %s", tc.in, f, err, tc.listen, tc.target)
		}
	}
}

// FuzzParseForward: -L/-R specs are user input: no panic, and an
// accepted one has both ends.
func FuzzParseForward(f *testing.F) {
	for _, s := range []string{"8080:localhost:80", "0.0.0.0:1:h:2", "[::1]:1:[::2]:2", "::::", "[[]]", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		fw, err := ParseForward(s)
		if err == nil && (fw.Listen == "" || fw.Target == "") {
			t.Fatalf("%q accepted as %+v", s, fw)
		}
	})
}
