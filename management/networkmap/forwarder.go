package networkmap

import (
	"strconv"
	"strings"

	"github.com/wiremesh/wiremesh/management/account"
)

// The DNS forwarder port of routing peers (DNSConfig.ForwarderPort), as
// NetBird's management server chooses it: routing peers of a domain
// resource answer its names on their overlay address at this port. Agents
// since NetBird 0.59.0 listen on 22054; older ones only on 5353 (where a
// current agent still answers, redirected to 22054), so the account gets
// 22054 only once every peer is at least 0.59.0. A peer whose version does
// not parse counts as old; development builds ("development", "dev-…",
// "ci-…") count as current.
const (
	ForwarderPort       uint16 = 22054
	LegacyForwarderPort uint16 = 5353
)

// forwarderMinVersion is the first agent version that listens on ForwarderPort.
var forwarderMinVersion = [3]int{0, 59, 0}

// forwarderPort is the port the account's maps carry (see ForwarderPort).
func forwarderPort(peers []account.Peer) uint16 {
	if len(peers) == 0 {
		return LegacyForwarderPort
	}
	for _, p := range peers {
		if !forwarderCapable(p.Meta.NetbirdVersion) {
			return LegacyForwarderPort
		}
	}
	return ForwarderPort
}

// forwarderCapable reports whether an agent of version v listens on
// ForwarderPort.
func forwarderCapable(v string) bool {
	if v == "development" || strings.HasPrefix(v, "dev-") || strings.HasPrefix(v, "ci-") {
		return true
	}
	got, ok := semverCore(v)
	if !ok {
		return false
	}
	for i := range got {
		if got[i] != forwarderMinVersion[i] {
			return got[i] > forwarderMinVersion[i]
		}
	}
	return true
}

// semverCore parses MAJOR.MINOR.PATCH[-pre][+build] (an optional leading
// "v"; MINOR and PATCH may be left out, as semver's canonical form allows).
// A pre-release of the minimum (0.59.0-rc1) sorts below it, as in semver.
func semverCore(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexByte(v, '+'); i >= 0 {
		v = v[:i]
	}
	pre := false
	if i := strings.IndexByte(v, '-'); i >= 0 {
		v, pre = v[:i], true
	}
	parts := strings.Split(v, ".")
	if len(parts) == 0 || len(parts) > 3 {
		return out, false
	}
	for i, s := range parts {
		if s == "" || (len(s) > 1 && s[0] == '0') {
			return out, false
		}
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return out, false
		}
		out[i] = n
	}
	if pre && out == forwarderMinVersion {
		// 0.59.0-rc1 < 0.59.0: not yet capable.
		out[2] = -1
	}
	return out, true
}
