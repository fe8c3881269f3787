package main

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	in := "up with key 6F1C9A4E-0C5B-4C1E-9A55-2B7C1F0E9D10, then key=abc-def and 2b7c1f0e-9d10-4c1e-9a55-6f1c9a4e0c5b."
	out := string(redact([]byte(in)))
	if strings.Contains(out, "6F1C9A4E") || strings.Contains(out, "2b7c1f0e") || strings.Count(out, "(redacted-uuid)") != 2 {
		t.Fatalf("redacted: %s", out)
	}
	if !strings.Contains(out, "key=abc-def") {
		t.Fatalf("redaction ate text that is not a UUID: %s", out)
	}
}
