// Package version holds the build version, set with
// -ldflags "-X github.com/wiremesh/wiremesh/internal/version.Version=...".
package version

// Version is reported by every binary and sent to servers as netbirdVersion.
var Version = "0.77.1-wiremesh-dev"
