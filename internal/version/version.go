// Package version holds two versions that must not be confused: this
// project's own semantic version (Version, what an operator upgrades
// between and what our release notes and release checks talk about) and
// the NetBird release whose protocols we speak (NetBird).
//
// What goes on the wire where NetBird expects a NetBird version (the
// agent's netbirdVersion in its login meta, the daemon version official
// UIs read) is Wire(): the NetBird version with ours as semver build
// metadata, "0.77.1+wiremesh.0.2.0". NetBird's management compares that
// field as a semantic version (posture check minimum versions, feature
// gates such as the DNS forwarder port, which ignore build metadata), so
// it must compare equal to the release we are compatible with: a
// pre-release suffix such as "0.77.1-wiremesh" would sort below 0.77.1
// and fail "at least 0.77.1" checks.
//
// Version is set at build time:
//
//	go build -ldflags "-X github.com/wiremesh/wiremesh/internal/version.Version=0.2.0"
//
// (the Makefile, the Docker builds and getting-started.sh pass what
// scripts/version.sh prints).
package version

import "strings"

// Version is this project's semantic version. Builds replace it with
// scripts/version.sh's ("0.2.0" on the tag, "0.2.0+3.gabc1234.dirty" past
// it, "0.2.0+gabc1234" with no tag in reach, built from this value).
var Version = "0.2.0"

// NetBird is the NetBird release whose management, signal and relay
// protocols this code speaks and whose clients it serves.
const NetBird = "0.77.1"

// Wire is the version sent where NetBird peers and servers expect a
// NetBird version: NetBird + "+wiremesh." + Version, with Version reduced
// to what semver build metadata allows ([0-9A-Za-z-] identifiers joined
// by dots), so NetBird's parsers accept it and compare it as NetBird.
func Wire() string {
	meta := buildMeta(Version)
	if meta == "" {
		return NetBird + "+wiremesh"
	}
	return NetBird + "+wiremesh." + meta
}

// String is what `version` commands print: ours first (scripts that read
// the first field get our version), then the protocol version.
func String() string {
	return Version + " (wiremesh; NetBird " + NetBird + " protocol)"
}

// buildMeta maps s onto semver build metadata: characters outside
// [0-9A-Za-z-.] become '-', empty identifiers are dropped.
func buildMeta(s string) string {
	mapped := strings.Map(func(r rune) rune {
		switch {
		case r >= '0' && r <= '9', r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r == '-', r == '.':
			return r
		}
		return '-'
	}, strings.TrimPrefix(s, "v"))
	var ids []string
	for _, id := range strings.Split(mapped, ".") {
		if id != "" {
			ids = append(ids, id)
		}
	}
	return strings.Join(ids, ".")
}
