// Package unixuser holds the rule for Unix user names that SSH audit events
// carry: the agent sends only names that pass it and management accepts
// only those, so both sides share this one definition.
package unixuser

import "strings"

// MaxLen is the longest name accepted.
const MaxLen = 64

// Valid reports whether u is a POSIX-portable user name (what useradd
// accepts by default), also with '@' (directory users, user@domain), or
// empty.
func Valid(u string) bool {
	if len(u) > MaxLen || strings.HasPrefix(u, "-") {
		return false
	}
	for i, r := range u {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-', r == '@':
		case r == '$' && i == len(u)-1 && i > 0:
		default:
			return false
		}
	}
	return true
}
