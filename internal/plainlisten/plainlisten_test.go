package plainlisten

import (
	"errors"
	"strings"
	"testing"
)

func TestAddr(t *testing.T) {
	for _, tc := range []struct {
		listen, insecure string
		want             string
		public           bool
		err              string
	}{
		{want: "127.0.0.1:10000"},
		{listen: "[::1]:1", want: "[::1]:1"},
		{listen: "localhost:1", want: "localhost:1"},
		{listen: ":10000", err: "--insecure-listen :10000"},
		{listen: "0.0.0.0:1", err: "refusing plaintext"},
		{listen: "10.0.0.1:1", err: "TLS reverse proxy"},
		{insecure: ":10000", want: ":10000", public: true},
		{insecure: "127.0.0.1:5", want: "127.0.0.1:5"},
		{listen: ":1", insecure: ":2", err: "both set"},
		{listen: "10000", err: `--listen "10000"`},
	} {
		got, public, err := Addr(tc.listen, tc.insecure, "127.0.0.1:10000", "")
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Addr(%q, %q) err %v, want %q", tc.listen, tc.insecure, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want || public != tc.public {
			t.Errorf("Addr(%q, %q) = %q %v %v, want %q %v", tc.listen, tc.insecure, got, public, err, tc.want, tc.public)
		}
	}
	if _, _, err := Addr(":1", "", "", "--tls-cert-file"); !errors.Is(err, ErrPublic) || !strings.Contains(err.Error(), "serve TLS with --tls-cert-file") {
		t.Errorf("refusal with a TLS hint: %v", err)
	}
}
