// Package dnsname is the one place domain route patterns are matched
// against names: the routing peer's DNS forwarder, the agent's route
// manager and its resolver all decide "does this route cover this name"
// the same way (NetBird's: a pattern "*.x" covers x itself and every name
// under it; any other pattern covers exactly itself).
package dnsname

import "strings"

// Normalize is name in the form every comparison here uses: lower case,
// without the final dot.
func Normalize(name string) string { return strings.TrimSuffix(strings.ToLower(name), ".") }

// Base is the name a pattern is anchored at: x for "*.x" and for "x"
// (normalized). A host must send the whole of Base's tree to the agent's
// resolver for a wildcard to work.
func Base(pattern string) string { return strings.TrimPrefix(Normalize(pattern), "*.") }

// Coverage is how specifically pattern covers name (name normalized): 0
// not at all; for a wildcard 1 plus the length of its base, so that the
// longer base wins; an exact pattern beats every wildcard.
func Coverage(pattern, name string) int {
	p := Normalize(pattern)
	if base, ok := strings.CutPrefix(p, "*."); ok {
		if name == base || strings.HasSuffix(name, "."+base) {
			return 1 + len(base)
		}
		return 0
	}
	if name == p {
		return exact
	}
	return 0
}

// exact is the coverage of an exact pattern: above any wildcard's (a
// name is at most 255 bytes).
const exact = 1 << 30

// Covers reports whether pattern covers name (name normalized).
func Covers(pattern, name string) bool { return Coverage(pattern, name) > 0 }
