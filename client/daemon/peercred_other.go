//go:build !linux && !darwin

package daemon

import "errors"

// socketUID: this platform gives no peer credentials we read, so requests
// that need root through the socket are refused there.
func socketUID(uintptr) (uint32, error) {
	return 0, errors.New("peer credentials are not supported on this platform")
}
