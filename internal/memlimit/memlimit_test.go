package memlimit

import (
	"math"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		err  string
	}{
		{"400MiB", 400 << 20, ""},
		{"1GiB", 1 << 30, ""},
		{" 2GB ", 2e9, ""},
		{"16777216", 16 << 20, ""},
		{"500 MB", 500e6, ""},
		{"1GiB5", 0, "not a size"},
		{"", 0, "not a size"},
		{"MiB", 0, "not a size"},
		{"-5MiB", 0, "not a size"},
		{"400mb", 0, "unknown unit"},
		{"1M", 0, "unknown unit"},
		{"1MiB", 0, "minimum"},
		{"99999999999TiB", 0, "too large"},
	} {
		got, err := Parse(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("Parse(%q) = %d, %v; want error with %q", c.in, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Parse(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestApplySetsLimitAndMetrics(t *testing.T) {
	old := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(old)
	debug.SetMemoryLimit(math.MaxInt64)
	f := pflag.NewFlagSet("t", pflag.ContinueOnError)
	m := Bind(f)
	if err := f.Parse([]string{"--memory-limit", "bogus"}); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Apply(); err == nil || !strings.Contains(err.Error(), "--memory-limit") {
		t.Fatalf("bad value: %v, want an error naming the flag", err)
	}
	if debug.SetMemoryLimit(-1) != math.MaxInt64 {
		t.Fatal("a bad value changed the limit")
	}
	if len(Metrics()) != 1 {
		t.Fatal("without a limit only the memory used is reported")
	}
	if err := f.Parse([]string{"--memory-limit", "20MiB"}); err != nil {
		t.Fatal(err)
	}
	got, err := m.Apply()
	if err != nil || got != 20<<20 || debug.SetMemoryLimit(-1) != 20<<20 {
		t.Fatalf("Apply = %d, %v; runtime limit %d", got, err, debug.SetMemoryLimit(-1))
	}
	ms := Metrics()
	byName := map[string]float64{}
	for _, s := range ms {
		byName[s.Name] = s.Value
	}
	if byName["go_memory_limit_bytes"] != 20<<20 {
		t.Fatalf("metrics %v", ms)
	}
	// A test binary with the race detector uses more than 18 MiB of Go
	// memory; without, it may not: only check consistency.
	if near := byName["go_memory_used_bytes"] >= Near*(20<<20); (byName["go_memory_limit_near"] == 1) != near {
		t.Fatalf("near flag inconsistent: %v", ms)
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"400MiB", "1GiB", "2GB", "16777216", "x", "99999999999TiB", "1 KiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err == nil && n < 16<<20 {
			t.Fatalf("Parse(%q) = %d below the minimum", s, n)
		}
	})
}
