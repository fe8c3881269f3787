package main

import "golang.org/x/sys/unix"

// The termios ioctls of ssh_term_unix.go: macOS names them after BSD.
const ioctlGet, ioctlSet = unix.TIOCGETA, unix.TIOCSETA
