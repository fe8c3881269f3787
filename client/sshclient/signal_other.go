//go:build !unix

package sshclient

import "syscall"

// signalNumber is the local number of a signal named as SSH names it (0:
// unknown); this OS has no USR1/USR2.
func signalNumber(name string) int {
	for _, s := range []struct {
		n string
		v syscall.Signal
	}{{"HUP", syscall.SIGHUP}, {"INT", syscall.SIGINT}, {"QUIT", syscall.SIGQUIT}, {"KILL", syscall.SIGKILL}, {"TERM", syscall.SIGTERM}, {"PIPE", syscall.SIGPIPE}, {"SEGV", syscall.SIGSEGV}, {"ABRT", syscall.SIGABRT}} {
		if s.n == name {
			return int(s.v)
		}
	}
	return 0
}
