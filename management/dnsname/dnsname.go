// Package dnsname turns a peer's self-reported hostname into a DNS label that
// is valid (RFC 1123) and unique in its account. It is pure.
package dnsname

import (
	"strconv"
	"strings"
)

// MaxLabel is the longest DNS label.
const MaxLabel = 63

// Label sanitises a hostname into a lowercase label of letters, digits and
// hyphens. Only the first dot-separated part counts ("laptop.lan" gives
// "laptop"). An empty result becomes "peer".
func Label(hostname string) string {
	first, _, _ := strings.Cut(strings.TrimSpace(hostname), ".")
	var b strings.Builder
	lastHyphen := false
	for _, r := range strings.ToLower(first) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			b.WriteRune(r)
			lastHyphen = false
		default:
			if !lastHyphen && b.Len() > 0 {
				b.WriteByte('-')
				lastHyphen = true
			}
		}
		if b.Len() >= MaxLabel {
			break
		}
	}
	s := strings.Trim(b.String(), "-")
	if len(s) > MaxLabel {
		s = strings.Trim(s[:MaxLabel], "-")
	}
	if s == "" {
		return "peer"
	}
	return s
}

// Unique returns base, or base-2, base-3, ... whichever taken does not hold.
func Unique(base string, taken func(string) bool) string {
	if !taken(base) {
		return base
	}
	for i := 2; ; i++ {
		suffix := "-" + strconv.Itoa(i)
		b := base
		if len(b)+len(suffix) > MaxLabel {
			b = strings.TrimRight(b[:MaxLabel-len(suffix)], "-")
		}
		if c := b + suffix; !taken(c) {
			return c
		}
	}
}
