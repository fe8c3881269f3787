//go:build !darwin

package wg

// tunName is the requested name: Linux and Windows (wintun) take any.
func tunName(want string) string { return want }
