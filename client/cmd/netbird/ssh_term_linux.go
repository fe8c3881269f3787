package main

import "golang.org/x/sys/unix"

// The termios ioctls of ssh_term_unix.go.
const ioctlGet, ioctlSet = unix.TCGETS, unix.TCSETS
