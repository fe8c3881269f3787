package flagconf

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzParse feeds arbitrary bytes to the config file parser: it must not
// panic, and what it accepts must be well formed.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*.yaml")
	if err != nil || len(seeds) == 0 {
		f.Fatalf("no seeds in testdata: %v", err)
	}
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		entries, err := parse(data)
		if err != nil {
			return
		}
		for k, e := range entries {
			if k == "" || e.line < 1 {
				t.Fatalf("key %q line %d", k, e.line)
			}
			if !e.list && len(e.values) != 1 {
				t.Fatalf("key %q: scalar with %d values", k, len(e.values))
			}
		}
	})
}

// TestSeedsParse: the sample files in testdata are valid configs (they
// document the format as much as they seed the fuzzer), except those
// named bad-*.
func TestSeedsParse(t *testing.T) {
	seeds, _ := filepath.Glob("testdata/*.yaml")
	for _, p := range seeds {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		_, err = parse(b)
		if bad := filepath.Base(p)[:4] == "bad-"; bad != (err != nil) {
			t.Errorf("%s: %v", p, err)
		}
	}
}
