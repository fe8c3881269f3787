package releasecheck

import (
	"fmt"
	"strconv"
	"strings"
)

// Version is a parsed semantic version (semver.org 2.0): build metadata is
// dropped, as it takes no part in precedence.
type Version struct {
	Major, Minor, Patch uint64
	Pre                 []string // pre-release identifiers; none for a release
}

// ParseVersion parses MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], with an
// optional leading "v" as release tags carry.
func ParseVersion(s string) (Version, error) {
	in := s
	s = strings.TrimPrefix(s, "v")
	if i := strings.IndexByte(s, '+'); i >= 0 {
		if !validIdents(s[i+1:], false) {
			return Version{}, fmt.Errorf("%q: build metadata: %w", in, ErrBadVersion)
		}
		s = s[:i]
	}
	var v Version
	if i := strings.IndexByte(s, '-'); i >= 0 {
		if !validIdents(s[i+1:], true) {
			return Version{}, fmt.Errorf("%q: pre-release: %w", in, ErrBadVersion)
		}
		v.Pre = strings.Split(s[i+1:], ".")
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return Version{}, fmt.Errorf("%q: want MAJOR.MINOR.PATCH: %w", in, ErrBadVersion)
	}
	nums := [3]*uint64{&v.Major, &v.Minor, &v.Patch}
	for i, p := range parts {
		n, ok := number(p)
		if !ok {
			return Version{}, fmt.Errorf("%q: %q is not a number: %w", in, p, ErrBadVersion)
		}
		*nums[i] = n
	}
	return v, nil
}

// number parses a numeric identifier: digits, no leading zero.
func number(s string) (uint64, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// validIdents checks dot-separated identifiers of [0-9A-Za-z-]; numeric
// pre-release identifiers may not have leading zeros.
func validIdents(s string, pre bool) bool {
	for _, id := range strings.Split(s, ".") {
		if id == "" {
			return false
		}
		digits := true
		for _, c := range id {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				digits = false
			default:
				return false
			}
		}
		if pre && digits && len(id) > 1 && id[0] == '0' {
			return false
		}
	}
	return true
}

// String is the canonical form, without "v".
func (v Version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.Major, v.Minor, v.Patch)
	if len(v.Pre) > 0 {
		s += "-" + strings.Join(v.Pre, ".")
	}
	return s
}

// Compare orders by semver precedence: -1 when v < w, 0 when equal, +1
// when v > w. A pre-release precedes its release (1.0.0-rc.1 < 1.0.0).
func (v Version) Compare(w Version) int {
	for _, d := range [3][2]uint64{{v.Major, w.Major}, {v.Minor, w.Minor}, {v.Patch, w.Patch}} {
		if d[0] != d[1] {
			return cmpU(d[0], d[1])
		}
	}
	switch {
	case len(v.Pre) == 0 && len(w.Pre) == 0:
		return 0
	case len(v.Pre) == 0:
		return 1
	case len(w.Pre) == 0:
		return -1
	}
	for i := 0; i < len(v.Pre) && i < len(w.Pre); i++ {
		if c := comparePre(v.Pre[i], w.Pre[i]); c != 0 {
			return c
		}
	}
	return cmpU(uint64(len(v.Pre)), uint64(len(w.Pre)))
}

// comparePre: numeric identifiers compare numerically and precede
// alphanumeric ones, which compare in ASCII order.
func comparePre(a, b string) int {
	na, aNum := number(a)
	nb, bNum := number(b)
	switch {
	case aNum && bNum:
		return cmpU(na, nb)
	case aNum:
		return -1
	case bNum:
		return 1
	}
	return strings.Compare(a, b)
}

func cmpU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
