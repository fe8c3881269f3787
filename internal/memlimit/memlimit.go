// Package memlimit is the --memory-limit flag of the servers: a soft limit
// on the Go runtime's memory (GOMEMLIMIT, set from the flag so a service
// file or container needs no environment variable), under which the
// garbage collector works harder instead of letting the heap grow, and
// metrics that tell an operator when the process runs near it.
package memlimit

import (
	"fmt"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	wmmetrics "github.com/wiremesh/wiremesh/internal/metrics"
)

// Near is the share of the limit from which memory counts as near it.
const Near = 0.9

// Usage is the flag's help text.
const Usage = "soft memory limit of the process, e.g. 400MiB or 1GiB (sets GOMEMLIMIT: the garbage collector works harder near it; the metric go_memory_limit_near says when); default none, or the GOMEMLIMIT environment variable"

// Flag holds the parsed --memory-limit.
type Flag struct{ s string }

// Bind registers --memory-limit on f.
func Bind(f *pflag.FlagSet) *Flag {
	m := &Flag{}
	f.StringVar(&m.s, "memory-limit", "", Usage)
	return m
}

// Apply sets the limit if the flag was given and returns the limit in
// effect (0: none), or an error naming the flag.
func (m *Flag) Apply() (int64, error) {
	if m.s != "" {
		n, err := Parse(m.s)
		if err != nil {
			return 0, fmt.Errorf("--memory-limit: %w", err)
		}
		debug.SetMemoryLimit(n)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		return l, nil
	}
	return 0, nil
}

// Parse reads a size: a whole number of bytes with an optional unit B,
// KiB, MiB, GiB, TiB (powers of 1024) or KB, MB, GB, TB (powers of 1000),
// as GOMEMLIMIT writes them. At least 16 MiB: below, the process would do
// little but collect garbage.
func Parse(s string) (int64, error) {
	t := strings.TrimSpace(s)
	i := len(t)
	for i > 0 && (t[i-1] < '0' || t[i-1] > '9') {
		i--
	}
	num, unit := t[:i], strings.TrimSpace(t[i:])
	mult := map[string]int64{"": 1, "B": 1,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
		"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("%q: unknown unit %q (use B, KiB, MiB, GiB, TiB, KB, MB, GB or TB)", s, unit)
	}
	n, err := strconv.ParseInt(num, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q: not a size (a whole number and a unit, e.g. 400MiB)", s)
	}
	if n > math.MaxInt64/mult {
		return 0, fmt.Errorf("%q: too large", s)
	}
	if n*mult < 16<<20 {
		return 0, fmt.Errorf("%q: below the minimum of 16MiB", s)
	}
	return n * mult, nil
}

// Metrics reports the limit, the memory the runtime counts against it and
// whether it is near (>= Near of the limit).
func Metrics() []wmmetrics.Sample {
	limit := debug.SetMemoryLimit(-1)
	s := []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	used := float64(s[0].Value.Uint64() - s[1].Value.Uint64())
	out := []wmmetrics.Sample{{Name: "go_memory_used_bytes", Help: "memory the Go runtime counts against its limit", Kind: wmmetrics.Gauge, Value: used}}
	if limit == math.MaxInt64 {
		return out
	}
	near := 0.0
	if used >= Near*float64(limit) {
		near = 1
	}
	return append(out,
		wmmetrics.Sample{Name: "go_memory_limit_bytes", Help: "soft memory limit (--memory-limit, GOMEMLIMIT)", Kind: wmmetrics.Gauge, Value: float64(limit)},
		wmmetrics.Sample{Name: "go_memory_limit_near", Help: "1 when memory used is at least 90% of the limit", Kind: wmmetrics.Gauge, Value: near})
}
