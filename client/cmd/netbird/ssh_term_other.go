//go:build !linux && !darwin

package main

import (
	"errors"
	"os"
)

// isTerminal: raw terminal mode is implemented for Linux and macOS only;
// here interactive sessions run without a local PTY.
func isTerminal(*os.File) bool { return false }

func rawMode(*os.File) (func(), error) {
	return nil, errors.New("interactive terminal sessions (-t) are not supported on this OS: give a command")
}
